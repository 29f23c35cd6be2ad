#!/usr/bin/env bash
# A job run twice under the same id (issue 30, item 3): torchrun's default run id is the
# literal "none", so running a script again used to have every record of the second run
# counted as a duplicate of the first, with the first run's verdict shown and no word about
# it. Now the second run, new processes back at step 0, is the job's next generation: "none"
# names it, "none@1" the first run, both kept apart in the journal and restored after a
# restart; nothing is a duplicate, and the trainers of the second run take their slots
# without a "took over" warning (regression: under stagefrontier.torch.run Python never
# destroyed the client at exit, so the first run's slots looked abandoned).
set -euo pipefail
source deploy/demo/pipeline.sh
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/rerun" .
sf_torch_env
pids=()
trap 'sf_stop_all; kill ${pids[@]:-} 2>/dev/null || true' EXIT

sf_start_coordinator 17461 17462 || sf_fail "coordinator"
sf_start_sidecar node0
run() {  # run N: one run of job "none" (world 2, Gloo DDP) on node0, as torchrun's workers
  sf_torch_ranks none 2 17469 --steps 300
  wait "${pids[@]}"
  pids=()
  local r
  for r in 0 1; do mv "$SF_WORK/none-rank$r.log" "$SF_WORK/run$1-rank$r.log"; done  # run N's
}
accounted() {  # accounted JOB: steps accounted, once every record is in (0 while unknown)
  sf_ctl --json jobs | jq -r --arg j "$1" '[.jobs[] | select(.job == $j) | .steps_accounted // 0
    | tonumber] | first // 0'
}
wait_accounted() {  # wait_accounted JOB: until JOB accounted its 300 steps
  for _ in $(seq 100); do [ "$(accounted "$1")" -ge 299 ] && return 0; sleep 0.2; done
  sf_fail "job $1 did not account its steps: $(sf_ctl jobs)"
}

run 1
wait_accounted none
run 2
wait_accounted none@2
sf_ctl jobs
jobs=$(sf_ctl --json jobs)
[ "$(jq '.jobs | length' <<<"$jobs")" = 2 ] || sf_fail "two runs expected: $jobs"
first=$(jq -c '.jobs[] | select(.job == "none")' <<<"$jobs")
second=$(jq -c '.jobs[] | select(.job == "none@2")' <<<"$jobs")
[ "$(jq -r '.current // false' <<<"$first")" = false ] || sf_fail "first run current: $first"
[ "$(jq -r '.current' <<<"$second")" = true ] || sf_fail "second run not current: $second"
[ "$(jq -r '.generation' <<<"$second")" = 2 ] || sf_fail "generation: $second"
[ "$(jq -r '.job_id' <<<"$second")" = none ] || sf_fail "job id: $second"
sf_ctl jobs | grep -E '^none +2 .*\(earlier run\)' >/dev/null || sf_fail "sfctl jobs does not say earlier run"

# "none" names the newest run; nothing of it was a duplicate of the first.
health=$(sf_ctl --json health --job none)
[ "$(jq -r '.job' <<<"$health")" = none@2 ] || sf_fail "--job none is not the second run: $health"
dups=$(jq '[.ranks[].duplicates // 0 | tonumber] | add' <<<"$health")
[ "$dups" = 0 ] || sf_fail "duplicates in the second run: $health"
sf_ctl suspects --job none@1 | grep '^job none, window' >/dev/null || sf_fail "first run unreadable"
sf_ctl suspects --job none | grep '^job none@2, window' >/dev/null || sf_fail "second run's verdict"
grep -q 'job none: a new run (rank [01] came back as a new process at step 0 after step 299)' \
  "$SF_WORK/coordinator.log" || sf_fail "the coordinator did not log the new run"
if grep -h 'took over' "$SF_WORK"/run2-rank*.log; then
  sf_fail "the second run's trainers took over slots the first run released"
fi
# An earlier run is for reading: control requests go to the current run.
if sf_ctl control --job none@1 --pause 2>"$SF_WORK/ctl.err"; then sf_fail "paused an old run"; fi
grep -q 'earlier run of none' "$SF_WORK/ctl.err" || sf_fail "$(cat "$SF_WORK/ctl.err")"

# Both runs survive a restart, the second still current.
kill -TERM "$SF_COORD_PID" && wait "$SF_COORD_PID" 2>/dev/null || true
sf_start_coordinator 17461 17462 || sf_fail "coordinator restart"
jobs=$(sf_ctl --json jobs)
[ "$(jq -r '.jobs[] | select(.current == true) | .job' <<<"$jobs")" = none@2 ] \
  || sf_fail "after a restart: $jobs"
[ "$(accounted none)" -ge 299 ] || sf_fail "first run lost in the restart: $jobs"
ls "$SF_WORK"/data/none.journal "$SF_WORK"/data/none@2.journal >/dev/null
echo "PASS"
