#!/usr/bin/env bash
# The sidecar's batching on real processes: with default settings (batch_hold.h) records go out
# several steps per message (far fewer batches than steps reach the coordinator), and nothing is
# lost or late for it: every step is accounted complete and the verdicts come. No health goes
# between batches while the ranks step (health_cadence.h: the batches are the sidecar's sign of
# life), and health that goes with a batch rides in it. A sidecar stopped while it holds records (--batch-delay-ms 10000) sends them before
# it exits. Neither the coordinator nor the sidecar probes HTTP/2 bandwidth (a PING round trip
# every few messages: 16 points of a core at 12,500 sidecars) unless --http2-bdp-probe asks.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/batchdelay" .
trap 'sf_stop_all; kill ${SF_TRAINER_PIDS[@]:-} 2>/dev/null || true' EXIT

# gRPC logs each bandwidth-delay probe it schedules under this trace ("bdp[PEER]:sched").
export GRPC_TRACE=bdp_estimator GRPC_VERBOSITY=DEBUG
sf_start_coordinator 17401 17402 --window-steps 20 || sf_fail "coordinator"
sf_start_sidecar node0
sf_run_trainers bd 4 1 120 || sf_fail "trainers"
sf_wait_steps bd 120 30 || sf_fail "steps"
jobs=$(sf_ctl --json jobs)
[ "$(jq -r '.jobs[0].partial_steps // 0' <<<"$jobs")" = 0 ] || sf_fail "partial steps: $jobs"
batches=$(sf_metric 17402 stagefrontier_ingest_batches_total)
echo "120 steps of 4 ranks arrived in $batches batches"
# 8 steps per message (4 ranks on the node), and a batch at each 20-step window's end, make 18
# batches (30 before 2026-11-29, at 4 steps per message), fewer when the sidecar finds the
# segment after the trainers began (its first drain takes every step written so far: 23 seen),
# a few more where a rank lagged past a boundary; with --batch-delay-ms 0 this run sends about
# one message per step (94 batches for 120 steps).
[ "${batches:-0}" -ge 5 ] && [ "$batches" -le 45 ] || sf_fail "expected ~30 batches, got $batches"
label=$(sf_ctl --json suspects --job bd | jq -r '.verdict.label // empty')
[ -n "$label" ] || sf_fail "no verdict for job bd"

echo "== health while the ranks step: none between the batches"
health() { sf_metric 17402 stagefrontier_ingest_health_reports_total; }
h0=$(health)
t0=$(date +%s)
# About 20 ms a step: 700 steps in about 14 s, a batch every 80 ms.
sf_spawn_trainers hb 2 1 700 --stage-ms data=5,forward=5,backward=5,optimizer=5 --seed 5 \
  || sf_fail "trainers of job hb"
sf_wait_steps hb 100 20 || sf_fail "job hb did not start"
# In the steady state between: batches are the sign of life, nothing is news (no owner change,
# no drop) and no stage stays open, so no health at all (health_cadence.h; the max gap is 30 s).
# Before 2026-11-28 one went every 5 s at least (2.5 s after a batch, at slower steps).
h1=$(health)
sleep 6
h2=$(health)
sf_wait_trainers || sf_fail "trainers of job hb"
took=$(($(date +%s) - t0))
reports=$(($(health) - h0))
echo "job hb: $reports health reports in about $took s of stepping, $((h2 - h1)) in 6 s of them"
[ "$took" -ge 8 ] || sf_fail "job hb ran only $took s"
[ $((h2 - h1)) = 0 ] || sf_fail "$((h2 - h1)) health reports in 6 s of steady stepping"
# The rest: with the ranks' first batch, at once when a rank's stage or the gap after its last
# step stays open past 1 s (the trainers starting and ending), and the slots released (news).
[ "$reports" -ge 1 ] && [ "$reports" -le 8 ] \
  || sf_fail "$reports health reports in $took s: expected 1 to 8"
# The coordinator said its limits after the Hello, before the first ack (StreamLimits): the
# sidecar kept the default cadence (the defaults are within them: no cap logged), not the
# 2.5 s one a coordinator that predates the message needs.
! grep -q "predates StreamLimits" "$SF_WORK/sidecar-node0.log" \
  || sf_fail "the sidecar took this coordinator for one that predates StreamLimits"
! grep -q "for lost and ends a stream idle" "$SF_WORK/sidecar-node0.log" \
  || sf_fail "the default cadence was capped: $(grep 'for lost' "$SF_WORK/sidecar-node0.log")"

echo "== no HTTP/2 bandwidth probes while they stepped"
probes() { grep -c 'bdp\[.*:sched' "$1" || true; }
[ "$(probes "$SF_WORK/coordinator.log")" = 0 ] || sf_fail "the coordinator probed bandwidth:" \
  "$(grep -m3 'bdp\[' "$SF_WORK/coordinator.log")"
[ "$(probes "$SF_WORK/sidecar-node0.log")" = 0 ] || sf_fail "the sidecar probed bandwidth:" \
  "$(grep -m3 'bdp\[' "$SF_WORK/sidecar-node0.log")"

echo "== a sidecar stopped while it holds records sends them first"
kill -TERM "$SF_SIDECAR_PID_node0"
wait "$SF_SIDECAR_PID_node0" || true
# Health rode the batches that declared each job's ranks (StepBatch.health: this coordinator
# says batch_health) instead of going as messages of their own.
stopped=$(grep 'sidecar stopped' "$SF_WORK/sidecar-node0.log" || true)
echo "$stopped"
grep -qE 'health [0-9]+ times alone, [1-9][0-9]* riding a batch' <<<"$stopped" \
  || sf_fail "no health rode a batch: $stopped"
sf_start_sidecar node0 --batch-delay-ms 10000
sf_run_trainers held 4 1 30 --seed 3 || sf_fail "trainers of job held"
sleep 1
[ "$(sf_ctl --json jobs | jq '[.jobs[] | select(.job == "held")] | length')" = 0 ] \
  || sf_fail "job held reached the coordinator before the 10 s hold ended"
kill -TERM "$SF_SIDECAR_PID_node0"
wait "$SF_SIDECAR_PID_node0" || true
sf_wait_steps held 30 10 || sf_fail "the held records were not sent at stop"

echo "== --http2-bdp-probe: the coordinator probes (the check above can see probes)"
sf_stop_all
mv "$SF_WORK/coordinator.log" "$SF_WORK/coordinator-1.log"
sf_start_coordinator 17401 17402 --window-steps 20 --http2-bdp-probe || sf_fail "coordinator"
sf_start_sidecar node0
sf_run_trainers bdp 4 1 60 --seed 7 || sf_fail "trainers of job bdp"
sf_wait_steps bdp 60 20 || sf_fail "steps of job bdp"
with=$(probes "$SF_WORK/coordinator.log")
echo "coordinator with --http2-bdp-probe: $with probes scheduled"
[ "$with" -ge 1 ] || sf_fail "no bandwidth probes with --http2-bdp-probe"
echo "PASS: 120 steps in $batches batches by default, none partial; $reports health reports in" \
  "$took s; held records sent at stop; bandwidth probes 0 by default, $with when asked"
