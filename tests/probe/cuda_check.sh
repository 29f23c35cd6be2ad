#!/usr/bin/env bash
# The CUDA half of the probe, run by ./run.sh test:
#   1. build the CUDA event backend (nvcc), the interposer against the real <nccl.h>, and the
#      GPU check program: wherever /usr/local/cuda exists (CI's machines);
#   2. run the GPU check under the probe where a GPU is visible.
# PREBUILT=DIR skips step 1 and runs step 2 from DIR, a copy of bazel-bin built elsewhere (a GPU
# machine without Bazel: docs/results.md says how it was carried there).
# Prints one line per check: "//tests/probe:<name> PASSED|FAILED" or "SKIPPED ...: why".
set -uo pipefail
cd "$(dirname "$0")/../.."
cuda=${CUDA_HOME:-/usr/local/cuda}
rc=0
bin=bazel-bin
if [ -n "${PREBUILT:-}" ]; then
  bin=$(cd "$PREBUILT" && pwd)
elif [ ! -x "$cuda/bin/nvcc" ]; then
  echo "SKIPPED //tests/probe:cuda_build: no nvcc at $cuda (CUDA is not a Debian package;" \
    "the probe's CUDA backend is built where CUDA is installed)"
  exit 0
elif bazel build //client/probe:cuda_backend //client/probe:nccl_signature_check \
  //tests/probe:gpu_check_bin //client/probe:libsfprobe.so //tests/probe:probe_ring_dump \
  //daemon/sweep:gpu_checks_cuda //tests/bench:probe_gpu_overhead; then
  echo "//tests/probe:cuda_build PASSED"
else
  echo "//tests/probe:cuda_build FAILED"
  exit 1
fi
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIPPED //tests/probe:gpu_check: no GPU on this machine (nvidia-smi -L fails)"
  exit 0
fi
work=$(mktemp -d)
out=$(STAGEFRONTIER_SHM_DIR="$work" STAGEFRONTIER_JOB_ID=gpucheck LOCAL_RANK=0 \
  STAGEFRONTIER_PROBE_BACKEND=cuda LD_LIBRARY_PATH="$cuda/lib:$cuda/lib64:${LD_LIBRARY_PATH:-}" \
  LD_PRELOAD="$bin/client/probe/libsfprobe.so" "$bin/tests/probe/gpu_check" 2>&1)
status=$?
echo "$out"
if [ $status -eq 77 ]; then
  echo "SKIPPED //tests/probe:gpu_check: ${out#SKIPPED: }"
  exit 0
fi
dump=$("$bin/tests/probe/probe_ring_dump" "$work/stagefrontier.gpucheck.seg" 0)
echo "$dump" | tail -n 4
summary=$(echo "$dump" | tail -n 1)
# 50 all-reduces, CUDA backend, nothing lost, each start after its call and end after start.
if [ $status -eq 0 ] && [ "$summary" = "backend cuda intervals 50 invalid 0 dropped 0" ] &&
  echo "$dump" | sed -n 1,50p | awk '$1 != "all_reduce" || $5 < $4 || $6 <= $5 { bad = 1 }
                                    END { exit bad }'; then
  echo "$dump" | sed -n 1,50p | awk '{ wait += $5 - $4; run += $6 - $5 }
    END { printf "gpu_check: mean call->start %.3f ms, start->end %.3f ms\n", wait / NR / 1e6, run / NR / 1e6 }'
  echo "//tests/probe:gpu_check PASSED"
else
  echo "//tests/probe:gpu_check FAILED"
  rc=1
fi
rm -rf "$work"
exit $rc
