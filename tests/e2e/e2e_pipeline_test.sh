#!/usr/bin/env bash
# End to end on loopback: a coordinator, 2 sidecars (two simulated nodes) and 16 synthetic
# trainer processes using the real stub, rank 11's data loader slowed by 15 ms from step 40.
# The injected (data, 11) must be the top suspect with a CLEAR verdict; sfctl's other views
# and its error exits are checked too.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/e2e" .
trap 'sf_stop_all; kill ${SF_TRAINER_PIDS[@]:-} 2>/dev/null || true' EXIT

sf_start_coordinator 17311 17312 --step-deadline-ms 5000 || sf_fail "coordinator"
sf_start_sidecar node0
sf_start_sidecar node1
sf_run_trainers job1 16 2 250 --fault data:11:15 --fault-start 40 || sf_fail "trainers"
sf_wait_steps job1 250 30 || sf_fail "steps"

sf_ctl suspects --job job1
json=$(sf_ctl --json suspects --job job1)
[ "$(jq -r .verdict.label <<<"$json")" = CLEAR ] || sf_fail "label $(jq -r .verdict.label <<<"$json")"
[ "$(jq -r '.verdict.suspects[0].stage' <<<"$json")" = data ] || sf_fail "top stage"
[ "$(jq -r '.verdict.suspects[0].rank' <<<"$json")" = 11 ] || sf_fail "top rank"
[ "$(jq -r .mean_top_stage <<<"$json")" = grad_sync ] || sf_fail "the mean dashboard should point at grad_sync"

# The trainers exited cleanly (their stubs released the slots): once the sidecars' next health
# report (every 2 s) is in, every rank and the job read "finished", none "missing" (issue 30).
for i in $(seq 60); do
  [ "$(sf_ctl --json jobs | jq -r '.jobs[0].state')" = finished ] && break
  sleep 0.1
done
jobs=$(sf_ctl --json jobs)
[ "$(jq -r '.jobs[0].partial_steps' <<<"$jobs")" = 0 ] || sf_fail "partial steps: $jobs"
[ "$(jq -r '.jobs[0].state' <<<"$jobs")" = finished ] || sf_fail "job not finished: $jobs"
[ "$(jq -r '.jobs[0].ranks_missing' <<<"$jobs")" = 0 ] || sf_fail "missing: $jobs"
sf_ctl jobs | grep "(finished)" >/dev/null || sf_fail "sfctl jobs does not say finished"
sf_ctl health --job job1 | grep "16 finished (job finished)" >/dev/null || sf_fail "sfctl health"
health=$(sf_ctl --json health --job job1)
[ "$(jq '[.ranks[] | select(.state == "finished")] | length' <<<"$health")" = 16 ] \
  || sf_fail "16 ranks finished: $health"
[ "$(jq '[.ranks[] | .records_accepted | tonumber] | add' <<<"$health")" = 4000 ] \
  || sf_fail "accepted rank-steps: $health"
[ "$(jq -r '[.ranks[] | .node] | unique | join(",")' <<<"$health")" = node0,node1 ] \
  || sf_fail "nodes: $health"
steps=$(sf_ctl --json steps --job job1 --from 100 --to 104)
[ "$(jq '.steps | length' <<<"$steps")" = 5 ] || sf_fail "steps: $steps"
[ "$(jq -r '.steps[0].stages[0].leader' <<<"$steps")" = 11 ] || sf_fail "data leader: $steps"
verdicts=$(sf_ctl --json watch --job job1 --count 2)
[ "$(wc -l <<<"$verdicts")" = 2 ] || sf_fail "watch: $verdicts"

# A trace request reaches rank 11's stub through node1's sidecar.
sf_ctl control --job job1 --trace-rank 11 --trace-steps 300:310 || sf_fail "control"
for i in $(seq 50); do grep -q "applied" "$SF_WORK/sidecar-node1.log" && break; sleep 0.1; done
# The trainers have exited, so no slot is active: the sidecar says so (ack not applied).
grep -qE "control request [0-9]+ for job job1" "$SF_WORK/sidecar-node1.log" || sf_fail "control relay"

# Errors: unknown job (exit 1), unreachable coordinator (exit 3), bad arguments (exit 2).
set +e
sf_ctl suspects --job nope 2>"$SF_WORK/err"; rc=$?
[ $rc = 1 ] && grep -q 'unknown job "nope"' "$SF_WORK/err" || sf_fail "unknown job: rc $rc"
./daemon/sfctl/sfctl --coordinator 127.0.0.1:1 --timeout 2 jobs 2>"$SF_WORK/err"; rc=$?
[ $rc = 3 ] && grep -q "cannot reach" "$SF_WORK/err" || sf_fail "unreachable: rc $rc"
sf_ctl control --job job1 --trace-rank 99 --trace-steps 1:2 2>"$SF_WORK/err"; rc=$?
[ $rc = 1 ] && grep -q "outside world size" "$SF_WORK/err" || sf_fail "bad rank: rc $rc"
set -e
echo "PASS"
