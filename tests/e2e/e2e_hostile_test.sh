#!/usr/bin/env bash
# End to end on loopback: two good jobs (12 trainer processes on 2 sidecars) keep being
# accounted, every step of them, while a hostile client attacks the same coordinator (a world
# size near 2^20, a stream that never reads its acks, a step number past 2^40, garbage bytes,
# a stream that never says Hello, a job id with a newline) and two other jobs' segments on
# node1 are overwritten and truncated under their trainers and the sidecar.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/e2e" .
trap 'sf_stop_all; kill ${SF_TRAINER_PIDS[@]:-} ${ALL_PIDS[@]:-} 2>/dev/null || true' EXIT
HOSTILE=./tests/e2e/hostile_client

# Usage errors exit 2, as documented (CLI11's own codes are 100 and up).
set +e
./daemon/sfctl/sfctl --bogus-flag jobs 2>/dev/null; rc=$?
[ $rc = 2 ] || sf_fail "sfctl usage error exits $rc, not 2"
./daemon/sfctl/sfctl --timeout 0 jobs 2>/dev/null; rc=$?
[ $rc = 2 ] || sf_fail "sfctl --timeout 0 exits $rc, not 2"
./daemon/sfctl/sfctl --timeout -1 jobs 2>/dev/null; rc=$?
[ $rc = 2 ] || sf_fail "sfctl --timeout -1 exits $rc, not 2"
./daemon/coordinator/stagefrontier-coordinator --data-dir "$SF_WORK/x" --max-world-size 0 \
  2>/dev/null; rc=$?
[ $rc = 2 ] || sf_fail "coordinator usage error exits $rc, not 2"
set -e

sf_start_coordinator 17361 17362 --hello-timeout-ms 1000 --max-stream-queue 64 \
  || sf_fail "coordinator"
sf_start_sidecar node0
sf_start_sidecar node1

ALL_PIDS=()
# The good jobs.
sf_spawn_trainers good-a 8 2 300 --fault data:5:10 --fault-start 50
ALL_PIDS+=("${SF_TRAINER_PIDS[@]}")
GOOD_PIDS=("${SF_TRAINER_PIDS[@]}")
sf_spawn_trainers good-b 4 2 300
ALL_PIDS+=("${SF_TRAINER_PIDS[@]}")
GOOD_PIDS+=("${SF_TRAINER_PIDS[@]}")
# Two more jobs on node1 whose segments will be damaged under them.
VICTIM_PIDS=()
for job in scribble trunc; do
  for r in 0 1; do
    env STAGEFRONTIER_SHM_DIR="$SF_WORK/shm-node1" TORCHELASTIC_RUN_ID=$job RANK=$r LOCAL_RANK=$r \
      WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 ./client/examples/synthetic_trainer --steps 400 \
      --barrier "$SF_WORK/$job.barrier" >>"$SF_WORK/trainer-$job.log" 2>&1 &
    VICTIM_PIDS+=($!)
  done
done
ALL_PIDS+=("${VICTIM_PIDS[@]}")

# The hostile client, all at once.
HOSTILE_PIDS=()
for mode in huge-world never-read poison-step garbage silent forged-name escape-node; do
  "$HOSTILE" "$SF_COORD" "$mode" >"$SF_WORK/hostile-$mode.log" 2>&1 &
  HOSTILE_PIDS+=($!)
done
ALL_PIDS+=("${HOSTILE_PIDS[@]}")

sleep 3
seg1="$SF_WORK/shm-node1"
[ -f "$seg1/stagefrontier.scribble.seg" ] && [ -f "$seg1/stagefrontier.trunc.seg" ] \
  || sf_fail "the victim segments were not created"
dd if=/dev/urandom of="$seg1/stagefrontier.scribble.seg" bs=4096 count=1 conv=notrunc 2>/dev/null
truncate -s 4096 "$seg1/stagefrontier.trunc.seg"

i=0
for p in "${HOSTILE_PIDS[@]}"; do
  mode=(huge-world never-read poison-step garbage silent forged-name escape-node)
  wait "$p" || { cat "$SF_WORK/hostile-${mode[$i]}.log" >&2; sf_fail "hostile ${mode[$i]} was not refused as it should be"; }
  cat "$SF_WORK/hostile-${mode[$i]}.log"
  i=$((i + 1))
done
for p in "${GOOD_PIDS[@]}" "${VICTIM_PIDS[@]}"; do
  wait "$p" || sf_fail "a trainer died (pid $p): $(tail -3 "$SF_WORK"/trainer-*.log)"
done

# Every step of the good jobs was accounted, none partial, every rank-step accepted.
for job in good-a good-b; do
  sf_wait_steps "$job" 300 60 || sf_fail "$job steps"
  info=$(sf_ctl --json jobs | jq --arg j "$job" '.jobs[] | select(.job == $j)')
  [ "$(jq -r .steps_accounted <<<"$info")" = 300 ] || sf_fail "$job accounted: $info"
  [ "$(jq -r '.partial_steps // 0' <<<"$info")" = 0 ] || sf_fail "$job partial: $info"
done
[ "$(sf_ctl --json health --job good-a | jq '[.ranks[] | .records_accepted | tonumber] | add')" = 2400 ] \
  || sf_fail "good-a rank-steps"
[ "$(sf_ctl --json health --job good-b | jq '[.ranks[] | .records_accepted | tonumber] | add')" = 1200 ] \
  || sf_fail "good-b rank-steps"
json=$(sf_ctl --json suspects --job good-a)
[ "$(jq -r '.verdict.suspects[0].stage + "/" + (.verdict.suspects[0].rank | tostring)' <<<"$json")" = data/5 ] \
  || sf_fail "good-a verdict: $(jq -c .verdict <<<"$json")"

# The coordinator held its memory, and counted each attack.
rss_kb=$(awk '/VmRSS/ {print $2}' "/proc/$SF_COORD_PID/status")
echo "coordinator RSS: $((rss_kb / 1024)) MB"
[ "$rss_kb" -lt 1048576 ] || sf_fail "coordinator RSS ${rss_kb} kB"
metrics=$(sf_metrics 17362)
metric() { awk -v m="$1" '$1 == m {print $2}' <<<"$metrics"; }
for m in 'stagefrontier_ingest_streams_cut_total{reason="slow_reader"}' \
         'stagefrontier_ingest_streams_cut_total{reason="malformed_message"}' \
         'stagefrontier_ingest_streams_cut_total{reason="hello_timeout"}' \
         'stagefrontier_rank_records_rejected_total{reason="RESOURCE_EXHAUSTED"}' \
         'stagefrontier_rank_records_rejected_total{reason="INVALID_ARGUMENT"}'; do
  v=$(metric "$m")
  echo "$m $v"
  [ "${v%.*}" -ge 1 ] 2>/dev/null || sf_fail "$m is '${v}'"
done
# A node name with escape sequences reaches sfctl's terminal masked (regression: raw).
shown=$(sf_ctl health --job hostile-esc) || sf_fail "health of hostile-esc"
if grep -q $'\x1b' <<<"$shown"; then sf_fail "sfctl printed an escape sequence: $(cat -v <<<"$shown")"; fi
grep -qF 'evil?]0;owned??[2J' <<<"$shown" || sf_fail "the node name is not shown masked: $(cat -v <<<"$shown")"
# Untrusted names never reach the log raw: no forged line.
if grep -q '^\[2026-11-23 00:00:00\] \[error\] forged' "$SF_WORK/coordinator.log"; then
  sf_fail "a forged log line reached the coordinator's log"
fi

# Node1's sidecar survived both damaged segments, and said so once each.
kill -0 "$SF_SIDECAR_PID_node1" || sf_fail "the sidecar of node1 died"
for job in scribble trunc; do
  n=$(grep -c "quarantined segment of job $job" "$SF_WORK/sidecar-node1.log" || true)
  [ "$n" = 1 ] || sf_fail "quarantine of $job said $n times"
done
grep "quarantined" "$SF_WORK/sidecar-node1.log"
echo "PASS"
