#!/usr/bin/env bash
# The node ledger across jobs, on real processes: two jobs run one after the other on the same
# two simulated nodes (8 ranks, 4 per node), a rank on node1 slowed in both (rank 5 in job1,
# rank 6 in job2). `sfctl nodes` must rank node1 first, chronic, with its wasted GPU-seconds
# and both jobs; node0 must stay healthy; the dry-run drain hook must log what it would run;
# the per-node gauges must be on /metrics; and a coordinator restart must keep the ledger.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/nodes" .
trap 'sf_stop_all; kill ${SF_TRAINER_PIDS[@]:-} 2>/dev/null || true' EXIT

drain='scontrol update nodename="$SF_NODE" state=drain reason="$SF_REASON"'
sf_start_coordinator 17351 17352 --window-steps 20 --drain-command "$drain" || sf_fail "coordinator"
sf_start_sidecar node0
sf_start_sidecar node1

sf_run_trainers job1 8 2 100 --fault data:5:12 --fault-start 40 || sf_fail "job1 trainers"
sf_wait_steps job1 100 30 || sf_fail "job1 steps"
after1=$(sf_ctl --json nodes)
echo "after job1: $(jq -c '[.nodes[] | {node, node_class, charged_windows, windows}]' <<<"$after1")"
[ "$(jq -r '.nodes[0].node' <<<"$after1")" = node1 ] || sf_fail "node1 first after job1: $after1"
[ "$(jq -r '.nodes[0].node_class' <<<"$after1")" = transient ] \
  || sf_fail "after job1 alone node1 should be transient (isolated episode): $after1"

sf_run_trainers job2 8 2 160 --fault data:6:12 --fault-start 40 --seed 2 || sf_fail "job2 trainers"
sf_wait_steps job2 160 30 || sf_fail "job2 steps"
sf_ctl nodes
nodes=$(sf_ctl --json nodes)
[ "$(jq -r '.nodes[0].node' <<<"$nodes")" = node1 ] || sf_fail "node1 must rank first: $nodes"
[ "$(jq -r '.nodes[0].node_class' <<<"$nodes")" = chronic ] || sf_fail "node1 chronic: $nodes"
[ "$(jq -r '.nodes[0].jobs | join(",")' <<<"$nodes")" = job1,job2 ] || sf_fail "both jobs: $nodes"
[ "$(jq -r '.nodes[0].jobs_charged' <<<"$nodes")" = 2 ] || sf_fail "jobs charged: $nodes"
[ "$(jq -r '.nodes[0].stages[0].stage' <<<"$nodes")" = data ] || sf_fail "stage: $nodes"
[ "$(jq -r '.nodes[0].host' <<<"$nodes")" = "$(hostname)" ] || sf_fail "host under node1: $nodes"
[ "$(jq -r '.nodes[0].address' <<<"$nodes")" = 127.0.0.1 ] || sf_fail "address: $nodes"
# 12 ms per faulty step x 7 waiting ranks, over at least 100 faulty steps: >= 8 GPU-seconds.
jq -e '.nodes[0].wasted_gpu_seconds > 5' <<<"$nodes" >/dev/null || sf_fail "GPU-seconds: $nodes"
[ "$(jq -r '.nodes[] | select(.node == "node0") | .node_class' <<<"$nodes")" = healthy ] \
  || sf_fail "node0 must stay healthy: $nodes"
[ "$(sf_ctl --json nodes --class chronic | jq '.nodes | length')" = 1 ] || sf_fail "--class"

# The cost line in suspects.
sf_ctl suspects --job job2 >"$SF_WORK/suspects.txt"
grep -q "GPU-hours in this window" "$SF_WORK/suspects.txt" || sf_fail "no cost line: $(cat "$SF_WORK/suspects.txt")"

# The dry-run drain hook said what it would run, once.
grep -q "drain hook (dry run.*node node1: would run: scontrol update" "$SF_WORK/coordinator.log" \
  || sf_fail "no dry-run drain line"
[ "$(grep -c "would run:" "$SF_WORK/coordinator.log")" = 1 ] || sf_fail "drain hook ran more than once"

metrics=$(sf_metrics 17352)
grep -q 'stagefrontier_node_class{node="node1"} 2' <<<"$metrics" || sf_fail "node class gauge"
grep -q 'stagefrontier_node_wasted_gpu_seconds{node="node1"}' <<<"$metrics" || sf_fail "gauge"
grep -q 'stagefrontier_drain_hook_nodes{outcome="dry_run"} 1' <<<"$metrics" || sf_fail "drain gauge"

# Regression (issue 28, attack 7): a second sidecar calling itself node1 while the real one is
# connected is refused, counted, and never charged.
echo "== an impostor sidecar claiming node1 is refused"
mkdir -p "$SF_WORK/shm-impostor"
"$SF_BIN/daemon/sidecar/stagefrontier-sidecar" --coordinator "$SF_COORD" --node node1 \
  --shm-dir "$SF_WORK/shm-impostor" >"$SF_WORK/impostor.log" 2>&1 &
impostor=$!
for _ in $(seq 50); do grep -q "claimed node node1" "$SF_WORK/impostor.log" && break; sleep 0.2; done
kill "$impostor" 2>/dev/null || true
wait "$impostor" 2>/dev/null || true
grep -q "claimed node node1 while sidecar node1/" "$SF_WORK/impostor.log" \
  || sf_fail "impostor not refused: $(cat "$SF_WORK/impostor.log")"
grep -q "claimed node node1 while sidecar node1/" "$SF_WORK/coordinator.log" \
  || sf_fail "the refusal is not in the coordinator's log"
metrics=$(sf_metrics 17352)
grep -q '^stagefrontier_node_identity_conflicts_total [1-9]' <<<"$metrics" \
  || sf_fail "conflict not counted"

echo "== restart the coordinator: the ledger is kept, and replayed windows are not counted twice"
before=$(jq -S -c '[.nodes[] | del(.ewma)]' <<<"$nodes")
sf_stop_all
sf_start_coordinator 17351 17352 --window-steps 20 --drain-command "$drain" || sf_fail "restart"
after=$(sf_ctl --json nodes | jq -S -c '[.nodes[] | del(.ewma)]')
[ "$before" = "$after" ] || { diff <(jq . <<<"$before") <(jq . <<<"$after") >&2; sf_fail "ledger changed across the restart"; }
[ "$(grep -c "would run:" "$SF_WORK/coordinator.log")" = 1 ] || sf_fail "the restart re-ran the hook"
echo "PASS: node1 chronic across job1 and job2, node0 healthy, dry-run drain logged, ledger kept"
