#!/bin/bash
# The stub's steady state makes no system call: strace the probe over ~1M stage marks (142857
# steps of 7 marks, both ring paths: publish and drop) and count the calls between its BEGIN
# and END markers. Skips (exit 0 with a note) only if ptrace is not permitted here.
set -euo pipefail
probe="$TEST_SRCDIR/$TEST_WORKSPACE/tests/client/steady_state_probe"
dir=$(mktemp -d "${TEST_TMPDIR:-/tmp}/sysXXXXXX")
trace="$dir/trace"
if ! strace -f -o /dev/null true 2>/dev/null; then
  echo "SKIPPED: strace cannot trace here (ptrace not permitted)"; exit 0
fi
# LeakSanitizer cannot run under ptrace; the ASan build's leak check happens in other tests.
ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" strace -f -o "$trace" "$probe" "$dir"
calls=$(awk '/write\(2, "BEGIN/ {on=1; next} /write\(2, "END/ {on=0} on' "$trace" | wc -l)
grep -q 'write(2, "BEGIN' "$trace" || { echo "FAILED: no BEGIN marker in the trace"; exit 1; }
grep -q 'write(2, "END' "$trace" || { echo "FAILED: no END marker in the trace"; exit 1; }
echo "system calls between BEGIN and END over 1M marks: $calls"
if [ "$calls" -ne 0 ]; then
  awk '/write\(2, "BEGIN/ {on=1; next} /write\(2, "END/ {on=0} on' "$trace" | sed -n 1,20p
  exit 1
fi
