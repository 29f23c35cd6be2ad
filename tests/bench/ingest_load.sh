#!/usr/bin/env bash
# The coordinator's capacity through real gRPC (docs/results.md "Coordinator ingest through
# gRPC"): the in-process benchmark and the load harness in one run, so that their ratio is
# taken on the same machine at the same time. Builds what it needs (-c opt). Ends with a table of
# the figures beside issue 33's goals (SPEC "100,000-GPU job with default settings").
#   tests/bench/ingest_load.sh            # all shapes below (about 8 minutes)
#   tests/bench/ingest_load.sh --quick    # the in-process figure and the 1,000-stream shape
#   tests/bench/ingest_load.sh --default  # the in-process figure and the default-settings shape
set -euo pipefail
cd "$(dirname "$0")/../.."
mode="${1:-}"
bazel build -c opt //tests/bench:ingest_load_harness //tests/bench:coordinator_ingest_benchmark \
  //daemon/coordinator:stagefrontier-coordinator >/dev/null 2>&1
bin=$(bazel info -c opt bazel-bin 2>/dev/null)
coord="$bin/daemon/coordinator/stagefrontier-coordinator"
harness="$bin/tests/bench/ingest_load_harness"

echo "== in process (decode, journal, align, account; no gRPC), 1,024 ranks"
inproc=$("$bin/tests/bench/coordinator_ingest_benchmark" \
  --benchmark_filter='BM_CoordinatorIngest/1024$' 2>/dev/null | grep BM_CoordinatorIngest)
echo "$inproc"
# rank_steps_per_s=1.1146M/s or =980.5k/s -> thousands per second
inproc_rate=$(sed -n 's/.*rank_steps_per_s=\([0-9.]*\)\([kM]\)\/s.*/\1 \2/p' <<<"$inproc" |
  awk '{ print ($2 == "M") ? $1 * 1000 : $1 }')

out=""
run() {
  echo "== $1"
  shift
  out=$("$harness" "$coord" "$@")
  echo "$out"
  rate=$(sed -n 's/.*: \([0-9.]*\) M rank-steps per coordinator CPU-second.*/\1/p' <<<"$out")
  if [[ -n "$rate" && -n "$inproc_rate" ]]; then
    awk -v g="$rate" -v i="$inproc_rate" \
      'BEGIN { printf "ratio through gRPC / in process: %.2f\n", g * 1000 / i }'
  fi
}
# field REGEX OUTPUT: the first capture of REGEX (sed -E) in OUTPUT, "-" if none.
field() { local v; v=$(sed -nE "s/$1/\\1/p" <<<"$2" | sed -n 1p); echo "${v:--}"; }

saturated="" default=""
if [[ "$mode" != "--default" ]]; then
  run "1,000 streams x 8 ranks, 32 steps per message, saturated" \
    --nodes 1000 --procs 4 --steps 800 --window 100 --steps-per-batch 32 --in-flight 2
  saturated="$out"
fi
if [[ "$mode" != "--quick" ]]; then
  # Windows of 40 steps: a multiple of the 8 steps per message an 8-rank node sends at 1 step/s
  # (with the default 100, batches also end at each window's last step: 12 of 8 steps, one of
  # 4). Default settings include each node's health as a sidecar sends it
  # (daemon/sidecar/health_cadence.h: news, at least every 30 s, every second in a stall).
  run "12,500 streams x 8 ranks (100,000 GPUs), 1 step/s, default sidecar settings (with health)" \
    --nodes 12500 --procs 8 --steps 120 --window 40 --sidecar-batching --step-rate 1 --in-flight 2
  default="$out"
fi
if [[ -z "$mode" ]]; then
  run "1,000 streams x 8 ranks, 4 steps per message, saturated" \
    --nodes 1000 --procs 4 --steps 400 --window 100 --steps-per-batch 4 --in-flight 2
  run "1,000 streams x 8 ranks, 4 steps per message, 12.5 steps/s (100,000 rank-steps/s)" \
    --nodes 1000 --procs 4 --steps 400 --window 100 --steps-per-batch 4 --step-rate 12.5 \
    --in-flight 2
  run "12,500 streams x 8 ranks (100,000 GPUs), 4 steps per message, 1 step/s" \
    --nodes 12500 --procs 8 --steps 40 --window 10 --steps-per-batch 4 --step-rate 1 --in-flight 2
  run "12,500 streams x 8 ranks (100,000 GPUs), 1 step per message, 1 step/s" \
    --nodes 12500 --procs 8 --steps 30 --window 10 --steps-per-batch 1 --step-rate 1 --in-flight 4
fi

echo
echo "== goals (issue 33), figures of this run"
printf '%-70s %-10s %s\n' "figure" "measured" "goal"
if [[ -n "$default" ]]; then
  printf '%-70s %-10s %s\n' \
    "12,500 streams, default sidecar settings: late records" \
    "$(field '.*accepted \(late ([0-9]+),.*' "$default")" "0" \
    "  coordinator CPU, % of one core" \
    "$(field '.*\(([0-9]+)% of one core\).*' "$default")" "<= 25" \
    "  ack p99, ms" "$(field '^ack latency.*p99 ([0-9.]+) ms.*' "$default")" "<= 1000" \
    "  verdict p99 after the last node's send, ms" \
    "$(field '^verdict latency over.*p99 ([0-9.]+) ms.*' "$default")" "<= 500" \
    "  verdict p99 after the window's last step ended (hold included), ms" \
    "$(field '^verdict latency from.*p99 ([0-9.]+) ms.*' "$default")" "(measured)" \
    "  RSS per idle stream, KB" "$(field '.*: ([0-9.]+) KB per idle stream.*' "$default")" "<= 64"
fi
if [[ -n "$saturated" ]]; then
  printf '%-70s %-10s %s\n' \
    "1,000 streams saturated: M rank-steps per coordinator CPU-second" \
    "$(field '.*: ([0-9.]+) M rank-steps per coordinator CPU-second.*' "$saturated")" ">= 0.9" \
    "  ratio to in process ($(awk -v i="$inproc_rate" 'BEGIN { printf "%.2f M", i / 1000 }'))" \
    "$(awk -v g="$(field '.*: ([0-9.]+) M rank-steps per coordinator CPU-second.*' "$saturated")" \
      -v i="$inproc_rate" 'BEGIN { if (g == "-" || i == "") print "-"; else printf "%.2f", g * 1000 / i }')" \
    ">= 0.90"
fi
