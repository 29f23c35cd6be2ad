#!/usr/bin/env bash
# Hangs on real processes (issue 31): three Gloo DDP ranks under stagefrontier.torch.run.
#  1. Rank 0 sleeps inside its forward stage at step 150 while ranks 1 and 2 block in the next
#     all-reduce: within seconds the job reads STALLED hung, naming rank 0, forward, step 150
#     (it used to read HEALTHY with rank 0 "missing"); sfctl health shows where each rank is;
#     the stall gauge is up; the verdict watch got the event at once; the stacks of rank 0 and
#     of a waiting rank were taken at once and `sfctl capture-report` shows them side by side.
#  2. Rank 1 kills itself with SIGKILL in its backward stage at step 100: STALLED dead, rank 1,
#     told apart from a stuck rank; Gloo then raises in ranks 0 and 2, waiting in grad_sync:
#     named after it, gone too. Then rank 2 raises an exception in forward at step 90 that its
#     trainer does not catch: STALLED dead, rank 2 first, "ended on an uncaught exception" (it
#     used to read finished, as did the others: the job read finished, no stall).
#     The node ledger counts the three hangs against node0.
#  3. Every rank pauses 8 s after step 100 (a checkpoint): a group-wide pause, no alarm.
#  4. The node's sidecar is killed while the job trains: sidecar_lost, no alarm (the
#     monitoring stopped, not the job). Also: a coordinator restarted during stall 1 reports it.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/hang" .
sf_torch_env
pids=()
trap 'sf_stop_all; kill -9 ${pids[@]:-} 2>/dev/null || true' EXIT

sf_start_coordinator 17471 17472 || sf_fail "coordinator"
sf_start_sidecar node0
job() {  # job ID PORT ARGS...: 3 ranks of ddp_example on node0, in the background
  local id=$1 port=$2
  shift 2
  sf_torch_ranks "$id" 3 "$port" "$@"
}
# wait_verdict JOB LABEL SECONDS: until `sfctl suspects` says LABEL; prints the reply (JSON).
wait_verdict() {
  local reply="" i
  for ((i = 0; i < $3 * 5; i++)); do
    reply=$(sf_ctl --json suspects --job "$1" 2>/dev/null || true)
    [ "$(jq -r '.verdict.label // ""' <<<"${reply:-{\}}")" = "$2" ] && { echo "$reply"; return 0; }
    sleep 0.2
  done
  sf_ctl suspects --job "$1" >&2 || true
  sf_fail "job $1 did not read $2 within $3 s"
}
newest() { sf_ctl --json jobs | jq -r --arg j "$1" '.jobs[] | select(.job == $j) | .last_step // -1'; }

echo "== 1. rank 0 hangs in forward at step 150"
job hung1 17473 --steps 1000 --hang forward:0:150
for _ in $(seq 150); do [ "$(newest hung1 2>/dev/null || echo -1)" -ge 0 ] 2>/dev/null && break; sleep 0.2; done
sf_ctl watch --job hung1 >"$SF_WORK/watch.log" 2>&1 &
watch_pid=$!
for _ in $(seq 150); do [ "$(newest hung1 2>/dev/null || echo -1)" -ge 149 ] 2>/dev/null && break; sleep 0.2; done
t0=$(date +%s.%N)
reply=$(wait_verdict hung1 STALLED 30)
t1=$(date +%s.%N)
sf_ctl suspects --job hung1
stall=$(jq -c '.verdict.stall' <<<"$reply")
[ "$(jq -r '.reason' <<<"$stall")" = hung ] || sf_fail "not hung: $stall"
[ "$(jq -r '.ranks[0].rank // 0' <<<"$stall")" = 0 ] || sf_fail "not rank 0: $stall"
[ "$(jq -r '.ranks[0].role' <<<"$stall")" = stuck ] || sf_fail "rank 0 not stuck: $stall"
[ "$(jq -r '.ranks[0].stage' <<<"$stall")" = forward ] || sf_fail "not forward: $stall"
[ "$(jq -r '.ranks[0].step' <<<"$stall")" = 150 ] || sf_fail "not step 150: $stall"
echo "stall verdict $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s after the frontier reached step 149"
health=$(sf_ctl --json health --job hung1)
sf_ctl health --job hung1
[ "$(jq -r '.ranks[0].open_stage' <<<"$health")" = forward ] || sf_fail "health: $health"
# DDP waits for its all-reduce inside backward; the launcher shows the wait live as grad_sync
# once every gradient is ready (Client.show_open), so the waiting ranks are seen there.
[ "$(jq -r '.ranks[1].open_stage' <<<"$health")" = grad_sync ] || sf_fail "health: $health"
sf_metrics 17472 | grep -E '^stagefrontier_job_stalled_seconds\{training_job="hung1"\} [1-9]' \
  || sf_fail "no stalled-seconds gauge"
grep -q 'verdict STALLED hung' "$SF_WORK/watch.log" || sf_fail "watch: $(cat "$SF_WORK/watch.log")"
kill "$watch_pid" 2>/dev/null || true
# Evidence at the moment of the hang: the coordinator asked rank 0 (stuck) and a waiting rank
# for their stacks; faulthandler wrote them while rank 0 slept in forward and the others
# blocked in the all-reduce; the sidecar shipped them like a capture.
captures=$(sf_ctl --json captures --job hung1)
stacks_id=$(jq -r '[.decisions[] | select(.kind == "stacks" and .asked)][0].id // ""' <<<"$captures")
[ -n "$stacks_id" ] || sf_fail "no stack capture asked: $captures"
sf_ctl captures --job hung1
report=$(sf_ctl capture-report --job hung1 --capture "$stacks_id" --wait 40) \
  || sf_fail "stack report: $report"
echo "$report" | sed -n 1,60p
grep -q '^== rank 0 (stuck in forward at step 150' <<<"$report" || sf_fail "no stuck rank 0"
# Rank 0's main thread sleeps in the fault injector's hit(), called from the model's forward.
sed -n '/^== rank 0 /,/^== rank [1-9]/p' <<<"$report" | grep 'in hit' >/dev/null \
  || sf_fail "rank 0's stack does not show where it hangs"
sed -n '/^== rank 0 /,/^== rank [1-9]/p' <<<"$report" | grep 'in forward' >/dev/null \
  || sf_fail "rank 0's stack has no forward"
grep -q '^== rank [12] (waiting in grad_sync at step 150' <<<"$report" || sf_fail "no waiting rank"
sed -n '/^== rank [12] /,$p' <<<"$report" | grep 'in backward' >/dev/null \
  || sf_fail "the waiting rank's stack is not in backward (DDP's all-reduce wait)"
# A coordinator restarted during the stall reports it at once, from its journal.
kill -TERM "$SF_COORD_PID" && wait "$SF_COORD_PID" 2>/dev/null || true
sf_start_coordinator 17471 17472 || sf_fail "coordinator restart"
after=$(sf_ctl --json suspects --job hung1)
[ "$(jq -r '.verdict.label' <<<"$after")" = STALLED ] || sf_fail "after a restart: $after"
[ "$(jq -r '.verdict.stall.ranks[0].rank // 0' <<<"$after")" = 0 ] || sf_fail "after: $after"
kill -9 "${pids[@]}" 2>/dev/null || true
pids=()

echo "== 2. rank 1 dies (SIGKILL) in backward at step 100"
job dead1 17474 --steps 1000 --die backward:1:100
reply=$(wait_verdict dead1 STALLED 40)
sf_ctl suspects --job dead1
stall=$(jq -c '.verdict.stall' <<<"$reply")
[ "$(jq -r '.reason' <<<"$stall")" = dead ] || sf_fail "not dead: $stall"
[ "$(jq -r '[.ranks[] | select(.role == "dead") | .rank // 0] | .[0]' <<<"$stall")" = 1 ] \
  || sf_fail "not rank 1 dead first: $stall"
[[ "$(jq -r '.text' <<<"$stall")" == "rank 1 is gone: its process died in backward of step 100"* ]] \
  || sf_fail "dead text: $stall"
kill -9 "${pids[@]}" 2>/dev/null || true
pids=()
job raise1 17477 --steps 1000 --raise forward:2:90
reply=$(wait_verdict raise1 STALLED 40)
sf_ctl suspects --job raise1
stall=$(jq -c '.verdict.stall' <<<"$reply")
[ "$(jq -r '.reason' <<<"$stall")" = dead ] || sf_fail "raise: not dead: $stall"
[ "$(jq -r '.ranks[0].rank // 0' <<<"$stall")" = 2 ] || sf_fail "raise: not rank 2: $stall"
[ "$(jq -r '.ranks[0].stage' <<<"$stall")" = forward ] || sf_fail "raise: not forward: $stall"
[ "$(jq -r '.ranks[0].step' <<<"$stall")" = 90 ] || sf_fail "raise: not step 90: $stall"
jq -r '.text' <<<"$stall" | grep "rank 2 is gone: its trainer ended on an uncaught exception" >/dev/null \
  || sf_fail "raise text: $stall"
kill -9 "${pids[@]}" 2>/dev/null || true
pids=()
# Rank 1 killed after its all-reduce: rank 0 raises Gloo's error from DDP's buffer broadcast in
# forward of step 101 (a compute stage). That rank is the peer's victim (exit reason
# collective_exception), so the killed rank is named first, not rank 0.
job deadbn 17478 --steps 1000 --batchnorm --die optimizer:1:100
reply=$(wait_verdict deadbn STALLED 40)
sf_ctl suspects --job deadbn
stall=$(jq -c '.verdict.stall' <<<"$reply")
[ "$(jq -r '.reason' <<<"$stall")" = dead ] || sf_fail "deadbn: not dead: $stall"
[[ "$(jq -r '.text' <<<"$stall")" == "rank 1 is gone: its process died in optimizer of step 100"* ]] \
  || sf_fail "deadbn: the killed rank is not named first: $stall"
kill -9 "${pids[@]}" 2>/dev/null || true
pids=()
# The node ledger charged node0 with the four hangs, three of them dead ranks.
nodes=$(sf_ctl --json nodes)
[ "$(jq -r '.nodes[] | select(.node == "node0") | .hangs // 0' <<<"$nodes")" = 4 ] \
  || sf_fail "node ledger hangs: $nodes"
[ "$(jq -r '.nodes[] | select(.node == "node0") | .hangs_dead // 0' <<<"$nodes")" = 3 ] \
  || sf_fail "node ledger dead hangs: $nodes"

echo "== 3. every rank pauses 8 s after step 100 (a checkpoint): no alarm"
job pause1 17475 --steps 300 --pause 100:8
wait "${pids[@]}"
pids=()
sf_ctl --json jobs | jq -e '.jobs[] | select(.job == "pause1") | .steps_accounted | tonumber >= 299' \
  >/dev/null || sf_fail "pause1 did not finish"
# Every verdict the job holds, stalls included (watch prints them and waits for more).
verdicts=$(timeout 3 "$SF_BIN/daemon/sfctl/sfctl" --coordinator "$SF_COORD" watch --job pause1 \
  --after 0 2>/dev/null || true)
echo "$verdicts" | grep -E 'STALLED|RESUMED|no alarm' || true
# (An alarming pause prints "STALLED group_wide_pause: ...", a quiet one "... (no alarm yet)".)
if grep -qE 'verdict STALLED (hung|dead|desync|collective|unknown)|STALLED group_wide_pause:' \
  <<<"$verdicts"; then
  sf_fail "an alarm on a checkpoint pause: $verdicts"
fi
echo "== 4. the sidecar dies while the job trains: not a hang of the job"
job lost1 17476 --steps 3000
for _ in $(seq 150); do [ "$(newest lost1 2>/dev/null || echo -1)" -ge 50 ] 2>/dev/null && break; sleep 0.2; done
kill -KILL "$SF_SIDECAR_PID_node0"
wait "$SF_SIDECAR_PID_node0" 2>/dev/null || true
unset SF_SIDECAR_PID_node0
reply=$(wait_verdict lost1 STALLED 30)
sf_ctl suspects --job lost1 | sed -n 1,4p
[ "$(jq -r '.verdict.stall.reason' <<<"$reply")" = sidecar_lost ] || sf_fail "not lost: $reply"
[ "$(jq -r '.verdict.stall.alarm // false' <<<"$reply")" = false ] || sf_fail "alarm: $reply"
kill -9 "${pids[@]}" 2>/dev/null || true
pids=()
echo "PASS"
