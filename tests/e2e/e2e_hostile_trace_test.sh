#!/usr/bin/env bash
# Issue 28, attack 3, on real processes: a trainer's user writes, as the suspect's capture, a
# trace whose pid nests 200,000 arrays. It used to overflow the coordinator's report thread
# (SIGSEGV: every job's ingest, verdicts and queries stopped; after a restart the capture read
# "waiting" forever). Now the analysis, in a child process and with a bounded parser, fails that
# report with the reason, and the coordinator serves on.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/hostiletrace" .
trap 'sf_stop_all; kill ${SF_TRAINER_PIDS[@]:-} 2>/dev/null || true' EXIT

sf_start_coordinator 17461 17462 --window-steps 50 || sf_fail "coordinator"
sf_start_sidecar node0
# The trainers' capture callbacks only say when to capture; the files are written below.
sf_spawn_trainers evil 4 1 400 --stage-ms data=1,forward=2,backward=2,optimizer=1 \
  --fault forward:2:8 --capture-callbacks
decision=""
for _ in $(seq 150); do
  decision=$(sf_ctl --json captures --job evil 2>/dev/null |
    jq -c '[.decisions[]? | select(.asked and ((.stage // "") != ""))] | first // empty' || true)
  [ -n "$decision" ] && break
  sleep 0.2
done
[ -n "$decision" ] || sf_fail "no capture asked: $(sf_ctl captures --job evil)"
id=$(jq -r '.id' <<<"$decision")
first=$(jq -r '.first_step' <<<"$decision")
suspect=$(jq -r '.suspects[0]' <<<"$decision")
dir="$SF_WORK/shm-node0/stagefrontier-captures/evil"
mkdir -p "$dir"
for r in $(jq -r '(.suspects + .references)[]' <<<"$decision"); do
  if [ "$r" = "$suspect" ]; then
    /usr/bin/python3 -c "
d = '[' * 200000 + ']' * 200000
print('{\"traceEvents\": [{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1,\"pid\":' + d + ',\"tid\":1}]}')
" >"$dir/.tmp$r"
  else
    printf '{"traceEvents": []}' >"$dir/.tmp$r"
  fi
  mv "$dir/.tmp$r" "$dir/trace_rank${r}_step${first}.json"  # a trace appears whole, as a trainer's
done
rc=0
sf_ctl capture-report --job evil --capture "$id" --wait 60 >"$SF_WORK/report.txt" || rc=$?
cat "$SF_WORK/report.txt"
[ $rc = 4 ] || sf_fail "capture-report exit $rc, want 4 (not analysed)"
report=$(sf_ctl --json capture-report --job evil --capture "$id" || true)  # exit 4: not analysed
[ "$(jq -r .state <<<"$report")" = failed ] || sf_fail "state: $report"
[[ "$(jq -r .detail <<<"$report")" == *"rank $suspect: "*"nested deeper than 64"* ]] \
  || sf_fail "detail: $report"
# The coordinator is alive and serves: the job goes on being accounted.
kill -0 "$SF_COORD_PID" || sf_fail "the coordinator died"
sf_wait_trainers || sf_fail "trainers"
sf_wait_steps evil 400 30 || sf_fail "steps after the hostile trace"
metrics=$(sf_metrics 17462)
grep -q 'stagefrontier_capture_reports_total{result="failed"} 1' <<<"$metrics" \
  || sf_fail "the failed report is not counted"
echo "PASS: the hostile trace failed its report; the coordinator served on"
