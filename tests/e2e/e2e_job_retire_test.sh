#!/usr/bin/env bash
# Jobs that ended leave room for the next ones, on real processes (regression): the coordinator
# counted every job it ever held against --max-jobs, and a sidecar's stream every job it ever
# served against --max-jobs-per-stream, so that once that many jobs had run every new one was
# refused for as long as both kept running. Here both limits are 1 and a job is idle 1.5 s
# after its last sign of life: three jobs run one after the other through one sidecar (one
# stream), and each is taken. The ones before leave memory: the log says so, their series
# leave /metrics, a query names their journal; the first comes back from its journal when its
# ranks run again, and a restart restores only the job written last.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/retire" .
trap 'sf_stop_all; kill ${SF_TRAINER_PIDS[@]:-} 2>/dev/null || true' EXIT

limits=(--max-jobs 1 --max-jobs-per-stream 1 --job-retire-idle-ms 1500)
sf_start_coordinator 17581 17582 "${limits[@]}" || sf_fail "coordinator"
sf_start_sidecar node0
run() {  # run JOB NAME: 2 ranks, 60 steps of about 4 ms, accounted under NAME
  sf_run_trainers "$1" 2 1 60 --stage-ms data=2,forward=2 || sf_fail "trainers of $1"
  sf_wait_steps "$2" 60 30 || sf_fail "job $2 not taken: $(sf_ctl jobs 2>&1)"
  sleep 2  # idle past 1.5 s
}
run first first
run second second
run third third
sf_ctl jobs
grep -q 'job first left memory to make room for job second' "$SF_WORK/coordinator.log" \
  || sf_fail "the coordinator did not say it retired job first"
grep -q 'job second left memory to make room for job third' "$SF_WORK/coordinator.log" \
  || sf_fail "the coordinator did not say it retired job second"
[ "$(sf_ctl --json jobs | jq -r '[.jobs[].job] | join(",")')" = third ] \
  || sf_fail "jobs held: $(sf_ctl jobs)"
if sf_ctl health --job first >/dev/null 2>"$SF_WORK/q.err"; then sf_fail "job first answered"; fi
grep -q "left this coordinator's memory.*first.journal" "$SF_WORK/q.err" \
  || sf_fail "the query does not say where job first went: $(cat "$SF_WORK/q.err")"
page=$(sf_metrics 17582) || sf_fail "/metrics"
grep -q 'training_job="third"' <<<"$page" || sf_fail "no series of job third"
if grep -q 'training_job="first"' <<<"$page"; then sf_fail "job first's series stayed"; fi

# The first job's ranks again (new processes at step 0): restored from its journal, then its
# next run.
run first first@2
grep -q 'restored job first from .*first.journal (it had left memory)' "$SF_WORK/coordinator.log" \
  || sf_fail "job first not restored from its journal"

# A restart restores the job written last only; the others wait on disk.
kill -TERM "$SF_COORD_PID" && wait "$SF_COORD_PID" 2>/dev/null || true
sf_start_coordinator 17581 17582 "${limits[@]}" || sf_fail "coordinator restart"
grep -q '3 jobs have journals in .*: restoring the 1 written last (--max-jobs)' \
  "$SF_WORK/coordinator.log" || sf_fail "the restart did not say what it restored"
[ "$(sf_ctl --json jobs | jq -r '[.jobs[].job] | sort | join(",")')" = "first,first@2" ] \
  || sf_fail "after a restart: $(sf_ctl jobs)"
echo "PASS"
