#!/usr/bin/env bash
# A trainer whose stages differ from its job's (issue 30, item 7): every record of its rank is
# refused. That used to show nowhere but an info line of the sidecar saying "refused 0
# records". Now `sfctl health` shows the rank refused, why, and how many records; the sidecar
# warns (once, then once a minute).
set -euo pipefail
source deploy/demo/pipeline.sh
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/refused" .
pids=()
trap 'sf_stop_all; kill ${pids[@]:-} 2>/dev/null || true' EXIT

sf_start_coordinator 17451 17452 || sf_fail "coordinator"
sf_start_sidecar node0
shm="$SF_WORK/shm-node0"
mkdir -p "$shm"
rank() {  # rank R ARGS...: one process of job "mixed" (world 2) on node0
  local r=$1
  shift
  env STAGEFRONTIER_SHM_DIR="$shm" TORCHELASTIC_RUN_ID=mixed RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 \
    LOCAL_WORLD_SIZE=2 "$@" >>"$SF_WORK/rank$r.log" 2>&1
}
# Rank 0 (five stages) declares the job first; rank 1 (three stages: the C example) after.
rank 0 "$SF_BIN/client/examples/toy_loop_cc" --steps 300
for _ in $(seq 50); do [ "$(sf_ctl --json jobs | jq '.jobs | length')" = 1 ] && break; sleep 0.2; done
rank 1 "$SF_BIN/client/examples/toy_loop_c" 40
health=""
for _ in $(seq 50); do
  health=$(sf_ctl --json health --job mixed)
  [ "$(jq -r '.ranks[1].state' <<<"$health")" = refused ] &&
    [ "$(jq -r '.ranks[1].rejected // 0 | tonumber' <<<"$health")" -ge 40 ] && break
  sleep 0.2
done
sf_ctl health --job mixed
[ "$(jq -r '.ranks[1].state' <<<"$health")" = refused ] || sf_fail "rank 1 not refused: $health"
[ "$(jq -r '.ranks[1].rejected | tonumber' <<<"$health")" = 40 ] || sf_fail "refused count: $health"
[[ "$(jq -r '.ranks[1].last_error' <<<"$health")" == "refused: "*schema* ]] \
  || sf_fail "no reason: $health"
text=$(sf_ctl health --job mixed)
grep -qE '^1 +refused .* 40 .*refused: ' <<<"$text" || sf_fail "the table: $text"
grep -q '\[warning\] coordinator refused [0-9]* records of job mixed rank 1 (FAILED_PRECONDITION)' \
  "$SF_WORK/sidecar-node0.log" || sf_fail "no warning in the sidecar's log"
echo "PASS"
