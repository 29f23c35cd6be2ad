#!/usr/bin/env bash
# The load harness itself, at a tiny shape (docs/results.md "Coordinator ingest through gRPC"
# quotes its figures, so it must keep counting right): every rank-step of every node is
# accepted, none late, rejected or duplicated, and each window's verdict is timed, both as
# sidecars with default settings (their own batching, paced) and with fixed batches as fast as
# acks allow; 3 client processes over 16 nodes give them unequal shares of the streams.
#   ingest_load_harness_test.sh HARNESS COORDINATOR
set -euo pipefail
harness=$1 coord=$2
fail() { echo "FAIL: $*" >&2; exit 1; }

# check OUTPUT NODES STEPS WINDOWS: the counts the harness printed.
check() {
  local out=$1 nodes=$2 steps=$3 windows=$4
  local want=$((nodes * 8 * steps))
  grep -q "sent for .*: $want rank-steps accepted (late 0, rejected 0, duplicates 0)" <<<"$out" ||
    fail "expected $want rank-steps accepted and none late, rejected or duplicated"
  grep -q "verdict latency over $windows of $windows windows" <<<"$out" ||
    fail "expected a verdict for each of $windows windows"
  grep -q "streams held: $nodes of $nodes opened" <<<"$out" || fail "expected $nodes streams"
}

echo "== as sidecars with default settings, 10 steps/s"
out=$("$harness" "$coord" --port 17497 --nodes 24 --procs 2 --steps 40 --window 20 \
  --sidecar-batching --step-rate 10 --in-flight 2 2>&1) || { echo "$out"; fail "harness"; }
echo "$out"
check "$out" 24 40 2
grep -q "verdicts by window: step 19: .*; step 39: " <<<"$out" || fail "per-window verdicts"

echo "== fixed batches of 8 steps, as fast as acks allow, 3 client processes"
out=$("$harness" "$coord" --port 17497 --nodes 16 --procs 3 --steps 64 --steps-per-batch 8 \
  --window 32 --in-flight 2 2>&1) || { echo "$out"; fail "harness"; }
echo "$out"
check "$out" 16 64 2
echo "PASS"
