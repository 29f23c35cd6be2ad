#!/usr/bin/env bash
# Clang's thread-safety analysis over every library whose sources carry lock annotations
# (ABSL_GUARDED_BY and friends), run by ./run.sh test. The project builds with GCC, which ignores
# the attributes; this builds those libraries (and what they depend on) with clang-14 and
# -Wthread-safety as errors, in an output base of its own so that the GCC cache is kept.
# Then it builds //tests/thread_safety:wrong_lock, a deliberate error, and expects it to fail.
# Prints "//tests/thread_safety:<check> PASSED|FAILED".
#   tests/thread_safety/check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
base=${SF_THREAD_SAFETY_OUTPUT_BASE:-$HOME/.cache/bazel-thread-safety}
bazel_tsa() { bazel --output_base="$base" "$@" --config=thread_safety; }
rc=0
files=$(grep -rlE 'ABSL_(GUARDED_BY|PT_GUARDED_BY|EXCLUSIVE_LOCKS_REQUIRED|LOCKS_EXCLUDED)' \
  base daemon client shm --include='*.h' --include='*.cc' | sort)
targets=$(for f in $files; do
  bazel query "same_pkg_direct_rdeps(//$(dirname "$f"):$(basename "$f"))" 2>/dev/null
done | sort -u | tr '\n' ' ')
echo "thread-safety: $(echo "$files" | wc -w) annotated files in: $targets"
if [ -n "$targets" ] && bazel_tsa build --keep_going $targets; then
  echo "//tests/thread_safety:annotated_libraries PASSED"
else
  echo "//tests/thread_safety:annotated_libraries FAILED"
  rc=1
fi
out=$(bazel_tsa build //tests/thread_safety:wrong_lock 2>&1)
if [ $? -ne 0 ] && [[ "$out" == *"requires holding mutex 'mu_'"* ]]; then
  echo "//tests/thread_safety:wrong_lock_rejected PASSED"
else
  echo "$out" | tail -n 20
  echo "//tests/thread_safety:wrong_lock_rejected FAILED (the analysis let a lock error through)"
  rc=1
fi
exit $rc
