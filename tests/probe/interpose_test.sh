#!/bin/bash
# Interposition for real: the dynamic linker resolves NCCL's symbols to libsfprobe.so, which
# forwards to the fake libnccl loaded after it. Host-clock backend (no GPU needed).
set -euo pipefail
here="${TEST_SRCDIR}/${TEST_WORKSPACE}"
probe="$here/client/probe/libsfprobe.so"
fake="$here/tests/probe/libfake_nccl.so"
driver="$here/tests/probe/interpose_driver"
dir="${TEST_TMPDIR:-$(mktemp -d)}"
export STAGEFRONTIER_SHM_DIR="$dir" STAGEFRONTIER_JOB_ID="probe_interpose_$$" LOCAL_RANK=0
export STAGEFRONTIER_PROBE_BACKEND=host_clock
preload="$probe $fake"
if [[ "$(ldd "$probe")" == *libasan* ]]; then  # under --config=asan: the runtime goes first
  preload="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so) $preload"
fi
LD_PRELOAD="$preload" "$driver"

# A bad setting: one warning, collectives still forwarded.
out=$(STAGEFRONTIER_PROBE_SAMPLE=sometimes LD_PRELOAD="$preload" "$driver" 2>&1 || true)
echo "$out" | grep 'collectives are not timed: STAGEFRONTIER_PROBE_SAMPLE="sometimes"' >/dev/null ||
  { echo "$out"; exit 1; }
echo "PASS: bad settings reported, calls forwarded"
