#!/usr/bin/env bash
# Self-test on a live multi-process job (sfctl selftest): a rank whose trainer opted in
# (STAGEFRONTIER_ALLOW_SELFTEST=1) gets a known delay on one stage, its records are marked,
# and the verdict finds it; a sweep prints detection and false alarms; a job that did not opt
# in refuses, with the reason.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/selftest" .
trap 'sf_stop_all; kill ${SF_TRAINER_PIDS[@]:-} ${OTHER_PIDS[@]:-} 2>/dev/null || true' EXIT

# long_probe FILE RANK: a 500-step probe of 5 ms on RANK's data stage, run by an sfctl in the
# background (the sfctl process itself, not a subshell around it, so that signals reach it),
# its output in FILE; sets $long_pid and, once the coordinator accepted it, $long_id.
long_probe() {
  local file=$1 rank=$2
  "$SF_BIN/daemon/sfctl/sfctl" --coordinator "$SF_COORD" selftest --job allowed --rank "$rank" \
    --stage data --delay-ms 5 --steps 500 --lead-steps 20 --wait 600 >"$file" 2>&1 &
  long_pid=$!
  for _ in $(seq 50); do grep -q "^self-test [0-9]*:" "$file" && break; sleep 0.2; done
  long_id=$(sed -n 's/^self-test \([0-9]*\):.*/\1/p' "$file" | sed -n 1p)
  [ -n "$long_id" ] || sf_fail "the probe did not start: $(cat "$file")"
}

# selftest ARGS...: runs `sfctl --json selftest ARGS`; sets $out and its exit status $rc.
selftest() {
  set +e
  out=$(sf_ctl --json --timeout 5 selftest "$@")
  rc=$?
  set -e
  echo "$out"
}

sf_start_coordinator 17361 17362 --window-steps 40 --selftest-lease-s 3 || sf_fail "coordinator"
sf_start_sidecar node0
# Job "allowed": 4 ranks that opted in, long enough for one probe and a small sweep.
SF_TRAINER_ENV=(STAGEFRONTIER_ALLOW_SELFTEST=1)
sf_spawn_trainers allowed 4 1 9000 --stage-ms data=2,forward=3,backward=4,optimizer=1
sf_wait_steps allowed 100 60 || sf_fail "job allowed never accounted"

echo "== one probe: 25 ms on rank 2's data stage for 15 steps"
selftest --job allowed --rank 2 --stage data --delay-ms 25 --steps 15 --lead-steps 60 --wait 120
[ $rc = 0 ] || sf_fail "selftest exit $rc, want 0 (found): $out"
[ "$(jq -r .state <<<"$out")" = found ] || sf_fail "state is not found: $out"
[ "$(jq -r .steps_marked <<<"$out")" -ge 10 ] || sf_fail "too few marked records arrived: $out"
# (steps_done is the stub's own count as of its last health report, every 2 s: it lags, so
# the marked records the coordinator received are what is checked.)
measured=$(jq -r '.measured_delay_ns | tonumber' <<<"$out")
# The measured shift per delayed step must be near the 25 ms injected (wide: shared cores).
[ "$measured" -ge 12000000 ] && [ "$measured" -le 50000000 ] \
  || sf_fail "measured ${measured} ns, injected 25 ms"

echo "== a small sweep: 2 stages x 2 ranks"
set +e
sweep=$(sf_ctl --timeout 5 selftest --job allowed --sweep --stages data,optimizer --ranks 1,3 \
  --delay-ms 25 --steps 15 --wait 120)
rc=$?
set -e
echo "$sweep"
grep -q "self-test sweep of job allowed: detected [0-9]* of 4 probes" <<<"$sweep" \
  || sf_fail "no sweep summary"
grep -q "false alarms: [0-9]* of [0-9]* windows without a delay" <<<"$sweep" \
  || sf_fail "no false-alarm count"
[ $rc = 0 ] || [ $rc = 4 ] || sf_fail "sweep exit $rc (0 or 4 expected)"

# Regression (issue 28, attack 6): self-tests ran any number at once and kept running after
# sfctl gave up or was killed.
echo "== one self-test per job at a time; a killed sfctl's probe is cancelled by its lease"
long_probe "$SF_WORK/long.txt" 1
text=$(sf_ctl health --job allowed)
grep -q "^self-tests: 1 running (at most 1 a job" <<<"$text" || sf_fail "health: $text"
set +e
err=$(sf_ctl selftest --job allowed --rank 2 --stage data --delay-ms 5 --steps 5 2>&1); rc=$?
set -e
[ $rc = 1 ] && grep -q "1 self-test running already" <<<"$err" || sf_fail "second probe: $rc $err"
kill -9 "$long_pid"  # sfctl dies without cancelling: the coordinator's lease (3 s) does
wait "$long_pid" 2>/dev/null || true
state=""
for _ in $(seq 40); do
  state=$(sf_ctl --json selftest --job allowed --list 2>/dev/null \
    | jq -r --arg id "$long_id" '.tests[] | select((.id | tostring) == $id) | .state' || true)
  [ "$state" = cancelled ] && break
  sleep 0.25
done
[ "$state" = cancelled ] || sf_fail "the orphaned probe was not cancelled: $state"
text=$(sf_ctl health --job allowed)
grep -q "^self-tests: 0 running" <<<"$text" || sf_fail "health after the lease: $text"

echo "== sfctl selftest --cancel, and an interrupted sfctl cancels its probe"
long_probe "$SF_WORK/long2.txt" 1
out=$(sf_ctl selftest --job allowed --cancel "$long_id")
grep -q "self-test $long_id of job allowed cancelled" <<<"$out" || sf_fail "cancel: $out"
set +e
wait "$long_pid"; rc=$?
set -e
[ $rc = 1 ] && grep -q "cancelled by sfctl selftest --cancel" "$SF_WORK/long2.txt" \
  || sf_fail "the waiting sfctl (exit $rc): $(cat "$SF_WORK/long2.txt")"
long_probe "$SF_WORK/long3.txt" 2
kill -INT "$long_pid"
set +e
wait "$long_pid"; rc=$?
set -e
[ $rc = 130 ] || sf_fail "interrupted sfctl exit $rc, want 130: $(cat "$SF_WORK/long3.txt")"
grep -q "cancelled; told 1 sidecar" "$SF_WORK/long3.txt" || sf_fail "no cancel on SIGINT"
text=$(sf_ctl health --job allowed)
grep -q "^self-tests: 0 running" <<<"$text" || sf_fail "health after SIGINT: $text"

echo "== a job that did not opt in refuses"
ALLOWED_PIDS=("${SF_TRAINER_PIDS[@]}")
SF_TRAINER_ENV=()
# Its optimizer stage is declared but takes no time: detector health must say so.
sf_spawn_trainers closed 2 1 3000 --stage-ms data=2,forward=3,backward=4,optimizer=0
OTHER_PIDS=("${ALLOWED_PIDS[@]}")
sf_wait_steps closed 50 60 || sf_fail "job closed never accounted"
selftest --job closed --rank 1 --stage forward --delay-ms 10 --steps 5 --lead-steps 40 --wait 60
[ $rc = 1 ] || sf_fail "refused selftest exit $rc, want 1"
[ "$(jq -r .state <<<"$out")" = refused ] || sf_fail "state is not refused"
[[ "$(jq -r .detail <<<"$out")" == *STAGEFRONTIER_ALLOW_SELFTEST=1* ]] || sf_fail "no reason given"

echo "== detector health: healthy job, and a stage that never lasts"
# (Outputs are captured before grep: `grep -q` closing a pipe early fails it under pipefail.)
text=$(sf_ctl health --job allowed)
grep -q "^detector: healthy" <<<"$text" || sf_fail "job allowed not healthy"
health=$(sf_ctl --json health --job closed)
sf_ctl health --job closed
[ "$(jq -r '.detector_conditions[0].name' <<<"$health")" = stage_always_zero ] \
  || sf_fail "stage_always_zero not reported"
text=$(sf_ctl suspects --job closed)
grep -q "UNRELIABLE: stage_always_zero" <<<"$text" \
  || sf_fail "the verdict does not say it is unreliable"
metrics=$(sf_metrics 17362)
grep -q 'stagefrontier_detector_condition{condition="stage_always_zero",training_job="closed"} 1' \
  <<<"$metrics" || sf_fail "no detector gauge"

echo "== bad requests are refused by the coordinator"
set +e
err=$(sf_ctl selftest --job allowed --rank 9 --stage data 2>&1); rc=$?
set -e
[ $rc = 1 ] && grep -q "outside the job's world of 4 ranks" <<<"$err" || sf_fail "rank check: $err"
set +e
err=$(sf_ctl selftest --job allowed --rank 1 --stage nosuch 2>&1); rc=$?
set -e
[ $rc = 1 ] && grep -q "its stages are data, forward" <<<"$err" || sf_fail "stage check: $err"
kill "${SF_TRAINER_PIDS[@]}" "${OTHER_PIDS[@]}" 2>/dev/null || true
echo "PASS"
