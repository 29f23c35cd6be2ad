#!/usr/bin/env bash
# Beyond one coordinator, on real processes: two coordinators each owning one job (--jobs),
# one sidecar serving ranks of both jobs on its node and routing each job's records to its
# coordinator (--route). Each coordinator must account its own job whole and never see the
# other's; a bad --route is refused at start with the reason.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/twocoord" .
coord_b_pid=
trap 'sf_stop_all; kill ${SF_TRAINER_PIDS[@]:-} ${pids_a[@]:-} $coord_b_pid 2>/dev/null || true' EXIT

sf_start_coordinator 17411 17412 --jobs jobA --window-steps 20 --ingest-shards 4 || sf_fail "coordinator A"
mkdir -p "$SF_WORK/data-b"
"$SF_BIN/daemon/coordinator/stagefrontier-coordinator" --listen 127.0.0.1:17421 \
  --metrics-listen 127.0.0.1:17422 --data-dir "$SF_WORK/data-b" --jobs jobB --window-steps 20 \
  >>"$SF_WORK/coordinator-b.log" 2>&1 &
coord_b_pid=$!
# sf_ctl and sf_wait_steps ask $SF_COORD: pointed at coordinator B for one call.
ctl_b() { SF_COORD=127.0.0.1:17421 sf_ctl "$@"; }
for i in $(seq 100); do ctl_b --timeout 1 jobs >/dev/null 2>&1 && break; sleep 0.1; done

if "$SF_BIN/daemon/sidecar/stagefrontier-sidecar" --coordinator "$SF_COORD" \
  --route "jobB" --shm-dir "$SF_WORK/shm-x" >"$SF_WORK/bad-route.out" 2>&1; then
  sf_fail "a --route without an address was accepted"
fi
grep -q 'is not JOB=ADDRESS' "$SF_WORK/bad-route.out" || sf_fail "bad route: $(cat "$SF_WORK/bad-route.out")"

sf_start_sidecar node0 --route jobB=127.0.0.1:17421
sf_spawn_trainers jobA 4 1 100
pids_a=("${SF_TRAINER_PIDS[@]}")
sf_spawn_trainers jobB 4 1 100 --seed 5
sf_wait_trainers || sf_fail "jobB trainers"
SF_TRAINER_PIDS=("${pids_a[@]}")
sf_wait_trainers || sf_fail "jobA trainers"

sf_wait_steps jobA 100 30 || sf_fail "jobA on coordinator A"
SF_COORD=127.0.0.1:17421 sf_wait_steps jobB 100 30 || sf_fail "jobB on coordinator B"
[ "$(sf_ctl --json jobs | jq -r '[.jobs[].job] | join(",")')" = jobA ] \
  || sf_fail "coordinator A holds: $(sf_ctl --json jobs)"
[ "$(ctl_b --json jobs | jq -r '[.jobs[].job] | join(",")')" = jobB ] \
  || sf_fail "coordinator B holds: $(ctl_b --json jobs)"
for c in "sf_ctl" "ctl_b"; do
  [ "$($c --json jobs | jq -r '.jobs[0].partial_steps // 0')" = 0 ] || sf_fail "partial steps ($c)"
done
# Neither coordinator refused anything: the sidecar sent each job only to its own.
grep -q "refused" "$SF_WORK/sidecar-node0.log" && sf_fail "the sidecar saw refusals: $(grep refused "$SF_WORK/sidecar-node0.log")"
# Regression (issue 30, item 4): a second coordinator with coordinator A's --listen (another
# metrics port) bound the same port through SO_REUSEPORT and replayed its journals from the
# same --data-dir: split brain. Refused at start now, naming the other process, and A serves on.
echo "== one coordinator per port and per data directory"
# refused NAME DATA_DIR METRICS_PORT WANT [FLAGS...]: a coordinator on A's --listen must stop
# with exit 2 saying WANT.
refused() {
  local rc=0
  "$SF_BIN/daemon/coordinator/stagefrontier-coordinator" --listen "$SF_COORD" \
    --metrics-listen "127.0.0.1:$3" --data-dir "$2" "${@:5}" >"$SF_WORK/$1.log" 2>&1 || rc=$?
  [ $rc = 2 ] && grep -q "$4" "$SF_WORK/$1.log" || sf_fail "$1: rc $rc $(cat "$SF_WORK/$1.log")"
}
refused same-dir "$SF_WORK/data" 17431 "another coordinator (pid $SF_COORD_PID) uses --data-dir"
mkdir -p "$SF_WORK/data-c"
refused same-port "$SF_WORK/data-c" 17432 "cannot listen on $SF_COORD"
# A runs 4 ingest shards bound with SO_REUSEPORT: a coordinator of any shard count looks at the
# port first (or binds without SO_REUSEPORT) and is refused all the same.
refused same-port-1-shard "$SF_WORK/data-c" 17434 "cannot listen on $SF_COORD" --ingest-shards 1
refused same-port-16-shards "$SF_WORK/data-c" 17435 "cannot listen on $SF_COORD" --ingest-shards 16
# (Issue 30, item 6.) A taken metrics port said only CivetWeb's "null context when
# constructing CivetServer".
rc=0
"$SF_BIN/daemon/coordinator/stagefrontier-coordinator" --listen 127.0.0.1:17433 \
  --metrics-listen 127.0.0.1:17412 --data-dir "$SF_WORK/data-c" >"$SF_WORK/dup-metrics.log" 2>&1 \
  || rc=$?
[ $rc = 2 ] && grep -q "cannot serve /metrics on 127.0.0.1:17412: the address is in use" \
  "$SF_WORK/dup-metrics.log" || sf_fail "taken metrics port: rc $rc $(cat "$SF_WORK/dup-metrics.log")"
for _ in 1 2 3 4 5 6; do
  [ "$(sf_ctl --json jobs | jq -r '[.jobs[].job] | join(",")')" = jobA ] || sf_fail "A after the refusals"
done
echo "PASS: one sidecar, two jobs, each accounted whole by its own coordinator"
