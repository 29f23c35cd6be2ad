#!/usr/bin/env bash
# The probe's cost per collective (docs/results.md): the same harness, three ways, interleaved
# 5 times so that a noisy machine hurts all three alike.
#   bazel build -c opt //tests/bench:probe_overhead_harness //tests/probe:libfake_nccl.so \
#     //client/probe:libsfprobe.so && tests/bench/probe_overhead.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(cd "${BIN:-bazel-bin}" && pwd)  # BIN: a tree built elsewhere with the same layout
fake="$bin/tests/probe/libfake_nccl.so"
probe="$bin/client/probe/libsfprobe.so"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export FAKE_NCCL_SLEEP_US=0 FAKE_NCCL_NO_LOG=1 STAGEFRONTIER_SHM_DIR="$work" LOCAL_RANK=0
export STAGEFRONTIER_PROBE_BACKEND=host_clock
for round in 1 2 3 4 5; do
  echo "round $round"
  printf '  %-28s ' "fake libnccl alone:"
  LD_PRELOAD="$fake" $bin/tests/bench/probe_overhead_harness
  printf '  %-28s ' "probe, forwarding only:"
  STAGEFRONTIER_PROBE=0 LD_PRELOAD="$probe $fake" $bin/tests/bench/probe_overhead_harness 2>/dev/null
  printf '  %-28s ' "probe, every collective:"
  STAGEFRONTIER_JOB_ID="bench$round" LD_PRELOAD="$probe $fake" \
    $bin/tests/bench/probe_overhead_harness
done
