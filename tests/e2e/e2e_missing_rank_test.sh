#!/usr/bin/env bash
# A trainer process killed mid-run: its rank is reported missing (by the coordinator) and its
# owner dead (by the sidecar); the other ranks keep being accounted, and once they exit cleanly
# they are finished (not missing), while the job, its rank 3 killed, is not.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/missing" .
trap 'sf_stop_all; kill ${SF_TRAINER_PIDS[@]:-} 2>/dev/null || true' EXIT

sf_start_coordinator 17331 17332 --step-deadline-ms 300 || sf_fail "coordinator"
sf_start_sidecar node0
sf_spawn_trainers job1 8 1 300
sleep 3
echo "== SIGKILL rank 3"
kill -KILL "${SF_TRAINER_PIDS[3]}"
sf_wait_trainers || true   # rank 3's wait reports the kill
sf_wait_steps job1 300 30 || sf_fail "the other ranks must still be accounted"
sleep 2.5  # the sidecar reports slot health every 2 s
health=$(sf_ctl --json health --job job1)
sf_ctl health --job job1
[ "$(jq -r '.ranks[3].state' <<<"$health")" = missing ] || sf_fail "rank 3 not missing"
[ "$(jq -r '.ranks[3].owner' <<<"$health")" = dead ] || sf_fail "rank 3's owner not dead"
[ "$(jq -r '.missing' <<<"$health")" = 1 ] || sf_fail "missing count"
[ "$(jq '[.ranks[] | select(.state == "finished")] | length' <<<"$health")" = 7 ] \
  || sf_fail "the other 7 ranks, exited cleanly, must be finished"
[ "$(jq -r '.state' <<<"$health")" = running ] || sf_fail "a killed rank: the job is not finished"
jobs=$(sf_ctl --json jobs)
[ "$(jq -r '.jobs[0].partial_steps | tonumber > 0' <<<"$jobs")" = true ] || sf_fail "no partial steps"
[ "$(jq -r '.jobs[0].ranks_missing' <<<"$jobs")" = 1 ] || sf_fail "ranks_missing"
echo "PASS"
