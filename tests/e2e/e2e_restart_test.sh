#!/usr/bin/env bash
# Restarts mid-run. While 16 trainers run 400 steps: node0's sidecar is killed with SIGKILL
# and restarted, then the coordinator is killed with SIGKILL and restarted on the same data
# directory. No step may be lost (400 complete steps, none partial, exactly 400 accepted
# rank-steps per rank: re-sent records are recognized as duplicates, never counted twice), and
# the verdicts must be identical to those of a coordinator that replays the same journal in
# one uninterrupted pass, and to those of a coordinator that restores the journal compacted
# into record blocks (stagefrontier journal-compact). The live coordinator compacts its journal
# while it runs (--journal-compact-mb, every ~20 KB of records), before and after its SIGKILL.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/restart" .
trap 'sf_stop_all; kill ${SF_TRAINER_PIDS[@]:-} 2>/dev/null || true' EXIT

live_flags=(--step-deadline-ms 20000 --journal-compact-mb 0.02)
sf_start_coordinator 17321 17322 "${live_flags[@]}" || sf_fail "coordinator"
sf_start_sidecar node0
sf_start_sidecar node1
sf_spawn_trainers job1 16 2 400 --fault data:11:15 --fault-start 40

sleep 4
echo "== SIGKILL node0's sidecar, restart it"
kill -KILL "$SF_SIDECAR_PID_node0"; wait "$SF_SIDECAR_PID_node0" 2>/dev/null || true
sleep 0.3
sf_start_sidecar node0
sleep 4
echo "== SIGKILL the coordinator, restart it on the same data directory"
compactions_before=$(grep -c "journal compacted" "$SF_WORK/coordinator.log" || true)
kill -KILL "$SF_COORD_PID"; wait "$SF_COORD_PID" 2>/dev/null || true
sleep 0.5
sf_start_coordinator 17321 17322 "${live_flags[@]}" || sf_fail "coordinator restart"
sf_wait_trainers || sf_fail "trainers"
sf_wait_steps job1 400 40 || sf_fail "steps after restarts"

jobs=$(sf_ctl --json jobs)
echo "$jobs"
[ "$(jq -r '.jobs[0].steps_accounted' <<<"$jobs")" = 400 ] || sf_fail "steps accounted"
[ "$(jq -r '.jobs[0].partial_steps' <<<"$jobs")" = 0 ] || sf_fail "partial steps"
health=$(sf_ctl --json health --job job1)
[ "$(jq '[.ranks[] | select((.records_accepted | tonumber) == 400)] | length' <<<"$health")" = 16 ] \
  || sf_fail "every rank must have exactly 400 accepted rank-steps: $health"
echo "duplicates recognized after the restarts: $(jq '[.ranks[] | .duplicates | tonumber] | add' <<<"$health")"
grep -q "restored job job1" "$SF_WORK/coordinator.log" || sf_fail "no restore logged"
compactions=$(grep -c "journal compacted" "$SF_WORK/coordinator.log" || true)
echo "live compactions: $compactions_before before the SIGKILL, $compactions in all"
grep "journal compacted" "$SF_WORK/coordinator.log" | tail -1
[ "$compactions_before" -ge 1 ] && [ "$compactions" -gt "$compactions_before" ] \
  || sf_fail "the live journal must be compacted before and after the coordinator's restart"
! grep -q "journal not compacted" "$SF_WORK/coordinator.log" || sf_fail "a compaction failed"
sf_ctl suspects --job job1 | sed -n 1,3p
[ "$(sf_ctl --json suspects --job job1 | jq -r '.verdict.label + " " + .verdict.suspects[0].stage + " " + (.verdict.suspects[0].rank|tostring)')" = "CLEAR data 11" ] \
  || sf_fail "verdict after restarts"
live=$(sf_ctl --json watch --job job1 --count 4)

echo "== an uninterrupted replay of the same journal"
sf_stop_all
cp -r "$SF_WORK/data" "$SF_WORK/data-copy"
SF_WORK_SAVED=$SF_WORK
mkdir -p "$SF_WORK/replay"
cp -r "$SF_WORK/data-copy" "$SF_WORK/replay/data"
SF_WORK=$SF_WORK/replay
sf_start_coordinator 17323 17324 || sf_fail "replay coordinator"
replayed=$(sf_ctl --json watch --job job1 --count 4)
replayed_health=$(sf_ctl --json health --job job1 | jq -S 'del(.ranks[].last_report_age_ms)')
replayed_steps=$(sf_ctl --json steps --job job1 --from 0 --to 399)
sf_stop_all
SF_WORK=$SF_WORK_SAVED
[ "$live" = "$replayed" ] || { diff <(echo "$live") <(echo "$replayed") >&2; sf_fail "verdicts differ"; }

echo "== the same journal compacted into record blocks, restored"
mkdir -p "$SF_WORK/compact/data"
./daemon/analyze/stagefrontier journal-compact "$SF_WORK/data-copy/job1.journal" \
  --out "$SF_WORK/compact/data/job1.journal" | tee "$SF_WORK/compact.txt"
grep -q "read back and compared: the same records" "$SF_WORK/compact.txt" || sf_fail "compaction"
before=$(stat -c %s "$SF_WORK/data-copy/job1.journal")
after=$(stat -c %s "$SF_WORK/compact/data/job1.journal")
# What the same records take as plain frames (12 bytes of framing each, the header, the
# declaration): the live journal must be far below it, the offline compaction no larger.
figures=$(./daemon/analyze/stagefrontier journal-compact "$SF_WORK/data-copy/job1.journal" \
  --out "$SF_WORK/compact-figures.journal" --json)
plain=$(jq '.record_bytes + 12 * (.records + 1) + 16 + 200' <<<"$figures")
echo "journal: $before bytes live-compacted, about $plain as plain records, $after compacted offline"
[ "$before" -lt $((plain * 6 / 10)) ] || sf_fail "live journal $before bytes, plain about $plain"
[ "$after" -le "$before" ] || sf_fail "compacted $before -> $after bytes"
SF_WORK=$SF_WORK/compact
sf_start_coordinator 17323 17324 || sf_fail "coordinator on the compacted journal"
compacted=$(sf_ctl --json watch --job job1 --count 4)
compacted_health=$(sf_ctl --json health --job job1 | jq -S 'del(.ranks[].last_report_age_ms)')
compacted_steps=$(sf_ctl --json steps --job job1 --from 0 --to 399)
sf_stop_all
SF_WORK=$SF_WORK_SAVED
[ "$compacted" = "$replayed" ] || { diff <(echo "$replayed") <(echo "$compacted") >&2; sf_fail "verdicts differ after compaction"; }
[ "$compacted_health" = "$replayed_health" ] || { diff <(echo "$replayed_health") <(echo "$compacted_health") >&2; sf_fail "rank health differs after compaction"; }
[ "$compacted_steps" = "$replayed_steps" ] || sf_fail "steps differ after compaction"
echo "PASS: 400/400 steps, no partial step, verdicts identical to the uninterrupted replay and to the compacted journal's"
