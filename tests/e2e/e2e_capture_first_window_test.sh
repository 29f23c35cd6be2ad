#!/usr/bin/env bash
# A short job's first verdict asks its capture: the coordinator knows which ranks can take
# captures (here the synthetic trainer's C++ capture callbacks) as soon as their first records
# arrive, not at the sidecar's next periodic health report (--health-every-ms,
# --health-quiet-ms 60000 and --health-max-gap-ms 120000 here, so that only the report sent
# right behind the ranks' first records can tell it: the handler, once sent, is no news).
# Regression (capture_eval, 2026-11-24): that report used to go out when the trainer declared
# its handler, before its first records created the job at the coordinator, and was dropped
# there; the first window of a short job then read "cannot capture: no capture handler in the
# trainer of rank R", and the next capture fell after the job's end.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/firstwindow" .
trap 'sf_stop_all; kill ${SF_TRAINER_PIDS[@]:-} 2>/dev/null || true' EXIT

# Regression (CI, 2026-11-24): a sidecar that finds the segment with a window's steps already
# written sends them in the batch that declares the ranks, and that batch closes the first
# window; the report sent behind it came too late. Here the trainers start 1.5 s (about 100
# steps) before the sidecar, so the first batch always holds the whole first window.
sf_start_coordinator 17431 17432 --window-steps 50 || sf_fail "coordinator"
sf_spawn_trainers fw 4 1 300 --stage-ms data=1,forward=2,backward=2,optimizer=1 \
  --fault forward:2:8 --capture-callbacks
sleep 1.5
sf_start_sidecar node0 --health-every-ms 60000 --health-quiet-ms 60000 --health-max-gap-ms 120000
sf_wait_trainers || sf_fail "trainers"
sf_wait_steps fw 300 30 || sf_fail "steps"
caps=$(sf_ctl --json captures --job fw)
sf_ctl captures --job fw
first=$(jq -c '.decisions | sort_by(.verdict_last_step | tonumber) | first' <<<"$caps")
[ "$(jq -r '.asked' <<<"$first")" = true ] || sf_fail "the first decision asked nothing: $first"
[ "$(jq -r '.suspects | join(",")' <<<"$first")" = 2 ] || sf_fail "suspects: $first"
! grep -q "cannot capture" <<<"$caps" || sf_fail "a rank was taken as unable to capture: $caps"
# The ranks asked ran their callbacks around exactly those steps and answered done.
from=$(jq -r '.first_step' <<<"$first")
to=$((from + $(jq -r '.steps' <<<"$first") - 1))
begun=$(grep -c "capture of steps $from..$to begun" "$SF_WORK/trainer-fw.log" || true)
ended=$(grep -c "capture of steps $from..$to ended" "$SF_WORK/trainer-fw.log" || true)
[ "$begun" = 3 ] && [ "$ended" = 3 ] || sf_fail "callbacks: $begun begun, $ended ended of 3"
answers=$(jq -c '[.answers[] | .state]' <<<"$first")
[ "$answers" = '["done","done","done"]' ] || sf_fail "answers: $answers"
# Those flags go past what the coordinator holds a sidecar to (StreamLimits after the Hello):
# the sidecar keeps inside, and says so.
grep -q "health every 4500 ms in a stall, after 9500 ms of silence, at least every 30000 ms" \
  "$SF_WORK/sidecar-node0.log" || sf_fail "no capped cadence in the sidecar's log: $(
  grep -i 'coordinator' "$SF_WORK/sidecar-node0.log" | sed -n 1,5p)"
echo "PASS: the first window asked steps $from..$to of rank 2 and two references, answered done"
