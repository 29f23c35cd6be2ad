#!/usr/bin/env bash
# The collective probe on real processes: 4 synthetic trainers whose gradient sync is an
# ncclAllReduce (the tests' fake libnccl, a real cross-process barrier), with libsfprobe.so
# preloaded, through sidecar and coordinator.
#  1. SPEC scenario 4, backward a `mixed` stage, rank 2's backward 10 ms slower from step 60:
#     without the probe AMBIGUOUS MIXED_SYNC naming rank 2; with it CLEAR (backward, 2).
#  2. Rank 1 marks grad_sync finished before issuing the all-reduce: sfctl health reports
#     bracketing violations on rank 1 with the explanation; the other ranks have none.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/probe" .
trap 'sf_stop_all; kill ${SF_TRAINER_PIDS[@]:-} 2>/dev/null || true' EXIT
probe="$PWD/client/probe/libsfprobe.so"
fake="$PWD/tests/probe/libfake_nccl.so"

sf_start_coordinator 17341 17342 --step-deadline-ms 5000 || sf_fail "coordinator"
sf_start_sidecar node0

run_job() {  # JOB PRELOAD [trainer flags...]
  local job=$1 preload=$2
  shift 2
  SF_TRAINER_ENV=(LD_PRELOAD="$(sf_preload $preload)" FAKE_NCCL_BARRIER="$SF_WORK/$job.nccl"
                  STAGEFRONTIER_PROBE_BACKEND=host_clock)
  sf_run_trainers "$job" 4 1 260 --collective nccl "$@" || sf_fail "trainers of $job"
  sf_wait_steps "$job" 260 30 || sf_fail "steps of $job"
}

echo "== 1. mixed backward, no probe"
run_job mixed_plain "$fake" --mixed-backward --fault backward:2:10 --fault-start 60
sf_ctl suspects --job mixed_plain
json=$(sf_ctl --json suspects --job mixed_plain)
[ "$(jq -r .verdict.label <<<"$json")" = AMBIGUOUS ] || sf_fail "label without probe: $json"
[ "$(jq -r .verdict.reason <<<"$json")" = MIXED_SYNC ] || sf_fail "reason without probe: $json"
jq -e '.verdict.candidate_ranks | map(tonumber) | index(2) != null' <<<"$json" >/dev/null \
  || sf_fail "rank 2 not among the candidates: $json"

echo "== 1. mixed backward, with the probe"
run_job mixed_probe "$probe $fake" --mixed-backward --fault backward:2:10 --fault-start 60
sf_ctl suspects --job mixed_probe
json=$(sf_ctl --json suspects --job mixed_probe)
[ "$(jq -r .verdict.label <<<"$json")" = CLEAR ] || sf_fail "label with probe: $json"
[ "$(jq -r '.verdict.suspects[0].stage' <<<"$json")" = backward ] || sf_fail "top stage: $json"
[ "$(jq -r '.verdict.suspects[0].rank' <<<"$json")" = 2 ] || sf_fail "top rank: $json"
sleep 2.5  # slot health reaches the coordinator every 2 s
health=$(sf_ctl --json health --job mixed_probe)
[ "$(jq -r '.probe_collectives | tonumber >= 900' <<<"$health")" = true ] \
  || sf_fail "collectives checked: $health"
[ "$(jq -r '.probe_violations // 0 | tonumber' <<<"$health")" = 0 ] || sf_fail "violations: $health"

echo "== 2. rank 1's marks run ahead of its collective"
run_job ahead "$probe $fake" --marks-ahead-rank 1
sleep 2.5
sf_ctl health --job ahead | tee "$SF_WORK/health-ahead.txt"
health=$(sf_ctl --json health --job ahead)
[ "$(jq -r '.probe_findings[0].rank' <<<"$health")" = 1 ] || sf_fail "finding rank: $health"
# Not all 260: when rank 1 arrives last its all-reduce ends within the 50 us tolerance of the
# mark, which cannot be told from a bracketed one.
[ "$(jq -r '.probe_findings[0].violations | tonumber >= 130' <<<"$health")" = true ] \
  || sf_fail "finding violations: $health"
[ "$(jq -r '[.probe_findings[] | select(.rank != 1) | .violations // 0 | tonumber] | add' \
  <<<"$health")" = 0 ] || sf_fail "other ranks must have no violation: $health"
[ "$(jq -r '[.ranks[] | .probe_backend] | unique | join(",")' <<<"$health")" = host_clock ] \
  || sf_fail "probe backend per rank: $health"
grep -q "rank 1: .* collectives issued in \"optimizer\" lie in no stage allowed" \
  "$SF_WORK/health-ahead.txt" || sf_fail "explanation not printed"
# The same counts on /metrics.
metrics=$(sf_metrics 17342)
violations=$(grep '^stagefrontier_probe_collectives_total{' <<<"$metrics" | grep 'training_job="ahead"' |
  grep 'stage="optimizer"' | grep 'bracketing="violation"' | awk '{print $2}')
[ -n "$violations" ] && awk -v v="$violations" 'BEGIN { exit !(v >= 130) }' \
  || sf_fail "probe violations on /metrics: ${violations:-none}"
echo "PASS"
