#!/usr/bin/env bash
# The probe's cost on a real GPU and NCCL (docs/results.md): probe_gpu_overhead four ways,
# interleaved ROUNDS times (default 5) so that a noisy machine hurts all alike:
#   no probe | probe forwarding only | host-clock backend | CUDA-event backend.
#   bazel build -c opt //tests/bench:probe_gpu_overhead //client/probe:libsfprobe.so \
#     //client/probe:cuda_backend //tests/probe:probe_ring_dump && tests/bench/probe_gpu_overhead.sh
# BIN (default bazel-bin) names a tree built elsewhere with the same layout (a GPU machine
# without Bazel).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(cd "${BIN:-bazel-bin}" && pwd)
probe="$bin/client/probe/libsfprobe.so"
harness="$bin/tests/bench/probe_gpu_overhead"
rounds=${ROUNDS:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STAGEFRONTIER_SHM_DIR="$work" LOCAL_RANK=0
"$harness" 100 >/dev/null || { status=$?; [ $status -eq 77 ] && echo "SKIPPED: no GPU"; exit $status; }
for round in $(seq "$rounds"); do
  echo "round $round"
  printf '  %-26s ' "no probe:"
  "$harness" | tr '\n' ' '; echo
  printf '  %-26s ' "probe, forwarding only:"
  STAGEFRONTIER_PROBE=0 LD_PRELOAD="$probe" "$harness" 2>/dev/null | tr '\n' ' '; echo
  for backend in host_clock cuda; do
    printf '  %-26s ' "probe, $backend backend:"
    STAGEFRONTIER_JOB_ID="b$round$backend" STAGEFRONTIER_PROBE_BACKEND=$backend \
      LD_PRELOAD="$probe" "$harness" | tr '\n' ' '
    "$bin/tests/probe/probe_ring_dump" "$work/stagefrontier.b$round$backend.seg" 0 | tail -n 1
  done
done
