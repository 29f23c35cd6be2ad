#!/usr/bin/env bash
# Agreement with a full profiler: real PyTorch DDP (4 Gloo ranks under torchrun), rank 2's
# data loader 25 ms slower from step 20, instrumented with `-m stagefrontier.torch.run
# --annotate` and profiled with torch.profiler over the last 40 steps. `stagefrontier
# reduce-trace` reduces the 4 Chrome traces to the same stages and accounts them with the same
# engine: its top (stage, rank) must be the live summary's for the same steps (`sfctl
# suspects --window 40`), and the injected one. The traces' bytes and StageFrontier's for the
# same rank-steps are printed. Malformed traces get clear errors (exit 2). The script profiles
# itself, so its launcher runs with --no-captures and the coordinator asks no capture of it.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_torch_env
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/trace" .
trap 'sf_stop_all' EXIT
SF=daemon/analyze/stagefrontier
steps=${TRACE_TEST_STEPS:-100}
first=$((steps - 39))

sf_start_coordinator 17381 17382 --step-deadline-ms 10000 || sf_fail "coordinator"
sf_start_sidecar node0
mkdir -p "$SF_WORK/shm-node0" "$SF_WORK/traces"
STAGEFRONTIER_SHM_DIR="$SF_WORK/shm-node0" OMP_NUM_THREADS=1 \
  /usr/bin/python3 -m torch.distributed.run --nproc_per_node 4 --master_port 29621 \
  --rdzv_id trace --redirects 2 --tee 1 --log_dir "$SF_WORK/torchrun-logs" \
  -m stagefrontier.torch.run --annotate --no-captures client/examples/ddp_example.py \
  --steps "$steps" \
  --fault data:2:25 --fault-start 20 --profile-steps "$first:$((steps - 1))" \
  --profile-dir "$SF_WORK/traces" >"$SF_WORK/torchrun.log" 2>&1 || sf_fail "torchrun"
sf_wait_steps trace "$steps" 30 || sf_fail "steps"

# The script runs its own torch.profiler, so the launcher was told --no-captures: its ranks
# say they cannot capture, and the coordinator (captures on by default) asks none of them.
listed=$(sf_ctl captures --job trace)
echo "$listed"
grep -q "automatic captures on" <<<"$listed" || sf_fail "captures: $listed"
! grep -q "^  capture [0-9]" <<<"$listed" || sf_fail "a capture was asked of ranks that cannot: $listed"
grep -q "cannot capture: no capture handler in the trainer of rank" <<<"$listed" ||
  sf_fail "no 'cannot capture' decision: $listed"
live=$(sf_ctl --json suspects --job trace --window 40)
live_top=$(jq -r '.verdict.suspects[0] | "\(.stage):\(.rank)"' <<<"$live")
echo "live summary, last 40 steps: $live_top ($(jq -r .verdict.label <<<"$live"))"

traces=("$SF_WORK"/traces/trace_rank{0,1,2,3}.json)
"$SF" reduce-trace "${traces[@]}" | tee "$SF_WORK/reduced.txt"
reduced=$("$SF" reduce-trace --json "${traces[@]}")
reduced_top=$(jq -r '.report.verdict.suspects[0] | "\(.stage):\(.rank)"' <<<"$reduced")
echo "reduce-trace: $reduced_top over $(jq -r .steps <<<"$reduced") steps;" \
  "traces $(jq -r .trace_bytes <<<"$reduced") bytes, StageFrontier $(jq -r .packed_bytes <<<"$reduced") bytes"
[ "$(jq -r .steps <<<"$reduced")" = 40 ] || sf_fail "reduced steps: $(jq -r .steps <<<"$reduced")"
[ "$live_top" = data:2 ] || sf_fail "live top $live_top"
[ "$reduced_top" = "$live_top" ] || sf_fail "reduce-trace top $reduced_top != live $live_top"
[ "$(jq -r '.trace_bytes > 100 * .packed_bytes' <<<"$reduced")" = true ] || sf_fail "bytes"

echo "== malformed traces"
bad() {  # NAME CONTENT EXPECTED-MESSAGE
  printf '%s' "$2" >"$SF_WORK/$1.json"
  set +e
  out=$("$SF" reduce-trace "$SF_WORK/$1.json" 2>&1 >/dev/null)
  rc=$?
  set -e
  [ $rc -eq 2 ] || sf_fail "$1: exit $rc"
  grep -qF "$3" <<<"$out" || sf_fail "$1: message: $out"
  echo "$1: $out"
}
head -c 5000 "${traces[0]}" >"$SF_WORK/truncated.json"
set +e; out=$("$SF" reduce-trace "$SF_WORK/truncated.json" 2>&1 >/dev/null); rc=$?; set -e
[ $rc -eq 2 ] && grep -q "not valid JSON at byte" <<<"$out" || sf_fail "truncated: $rc $out"
echo "truncated: $out"
bad notrace '{"foo": 1}' 'no "traceEvents" array'
bad nosteps '{"traceEvents": [{"ph": "X", "name": "stagefrontier:data", "ts": 1, "dur": 2}]}' \
  'no "ProfilerStep#N" events'
bad noannot '{"traceEvents": [{"ph": "X", "name": "ProfilerStep#3", "ts": 1, "dur": 2}]}' \
  'no "stagefrontier:<stage>" ranges'
bad badts '{"traceEvents": [{"ph": "X", "name": "ProfilerStep#3", "ts": "x", "dur": 2}]}' \
  'has no numeric "ts" and "dur"'
bad badstep '{"traceEvents": [{"ph": "X", "name": "ProfilerStep#x", "ts": 1, "dur": 2}]}' \
  'does not end in a step number'
echo PASS
