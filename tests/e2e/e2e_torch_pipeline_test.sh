#!/usr/bin/env bash
# A real pipeline x data-parallel job (Debian's python3-torch, Gloo, CPU) under torchrun:
# tests/eval/workloads/pipeline_loop.py with 2 pipeline stages x 2 replicas (4 ranks; rank 3 is
# pipeline stage 1 of replica 1), hand-instrumented with its layout; rank 3's fwd is slowed by
# 8 ms every step from step 40. Through the real stub, sidecar and coordinator, the top suspect
# of `sfctl suspects --json` must be (fwd, 3): the slow rank's compute, not the sends, receives
# and all-reduces of the ranks that wait for it in the pipeline or in its data-parallel group.
# Then a healthy unbalanced pipeline (HEALTHY, structural) and a tensor-parallel-like job whose
# slow tensor group is named together.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_torch_env
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/torch-pipeline" .
trap 'sf_stop_all' EXIT

JOB=pipe
sf_start_coordinator 17481 17482 --step-deadline-ms 10000 || sf_fail "coordinator"
sf_start_sidecar node0
mkdir -p "$SF_WORK/shm-node0"
# torchrun sets TORCHELASTIC_RUN_ID from --rdzv_id: the job's name. Debian 12's torch 1.13 on
# Python 3.11 needs nonzero --redirects/--tee (see e2e_torch_ddp_test.sh).
STAGEFRONTIER_SHM_DIR="$SF_WORK/shm-node0" OMP_NUM_THREADS=1 \
  /usr/bin/python3 -m torch.distributed.run --nproc_per_node 4 --master_port 29661 \
  --rdzv_id "$JOB" --redirects 2 --tee 1 --log_dir "$SF_WORK/torchrun-logs" \
  tests/eval/workloads/pipeline_loop.py --pipeline-stages 2 --steps 240 \
  --fault fwd:3:8 --fault-start 40 >"$SF_WORK/torchrun.log" 2>&1 || sf_fail "torchrun"
# The ms/step line, and the warning if this stub's Client took no layout.
grep pipeline_loop "$SF_WORK/torchrun.log" || true
sf_wait_steps "$JOB" 240 30 || sf_fail "steps"
sf_ctl suspects --job "$JOB"
json=$(sf_ctl --json suspects --job "$JOB")
top=$(jq -r '.verdict.suspects[0] | "\(.stage):\(.rank)"' <<<"$json")
summary=$(jq -c '{label: .verdict.label, reason: .verdict.reason, group: .verdict.group,
  group_wide: .verdict.group_wide, sync_group: .verdict.sync_group,
  suspects: [.verdict.suspects[:5][] | {stage, rank, share, excess_ns, flagged_steps}]}' \
  <<<"$json")
echo "top suspect: $top; verdict: $summary"
[ "$top" = "fwd:3" ] || sf_fail "top suspect $top, not fwd:3; verdict: $summary"
# The group verdict: CLEAR inside pipeline stage 1's group, naming rank 3 alone (its replica
# peer, rank 2, is not tied with it), and no detector condition from the stages a pipeline
# stage leaves empty by role (the last stage sends no activations).
[ "$(jq -r .verdict.label <<<"$json")" = CLEAR ] || sf_fail "not CLEAR: $summary"
[ "$(jq -r .verdict.sync_group <<<"$json")" = pp1 ] || sf_fail "not sync group pp1: $summary"
[ "$(jq -c .verdict.candidate_ranks <<<"$json")" = "[3]" ] ||
  sf_fail "candidates $(jq -c .verdict.candidate_ranks <<<"$json"), not [3]"
health=$(sf_ctl health --job "$JOB")
unreliable=$(jq -c '.verdict.unreliable // []' <<<"$json")
[ "$unreliable" = "[]" ] || sf_fail "detector conditions $unreliable: $health"

echo "$health" | grep "sync groups"
grep -q "sync groups from the declared layout: 2: pp0 (ranks 0, 1); pp1 (ranks 2, 3)" \
  <<<"$health" || sf_fail "sfctl health does not show the layout's groups: $health"

# A healthy pipeline, unbalanced by design (stage 1 does 3 ms more work in fwd and bwd): its
# stages are never compared with each other, so no rank is named.
HEALTHY=pipe-healthy
STAGEFRONTIER_SHM_DIR="$SF_WORK/shm-node0" OMP_NUM_THREADS=1 \
  /usr/bin/python3 -m torch.distributed.run --nproc_per_node 4 --master_port 29662 \
  --rdzv_id "$HEALTHY" --redirects 2 --tee 1 --log_dir "$SF_WORK/torchrun-logs-healthy" \
  tests/eval/workloads/pipeline_loop.py --pipeline-stages 2 --steps 240 \
  --stage-work-ms 0,3 >"$SF_WORK/torchrun-healthy.log" 2>&1 || sf_fail "torchrun (healthy)"
sf_wait_steps "$HEALTHY" 240 30 || sf_fail "steps (healthy)"
sf_ctl suspects --job "$HEALTHY"
json=$(sf_ctl --json suspects --job "$HEALTHY")
label=$(jq -r .verdict.label <<<"$json")
echo "healthy unbalanced pipeline: $label; $(jq -r .verdict.structural <<<"$json")"
[ "$label" = HEALTHY ] || sf_fail "the healthy unbalanced pipeline reads $label: $(jq -c \
  '{label: .verdict.label, reason: .verdict.reason, sync_group: .verdict.sync_group,
    suspects: [.verdict.suspects[:3][] | {stage, rank, share}]}' <<<"$json")"
# 3 ms more in fwd and in bwd on pipeline stage 1: said as structural, naming pp1.
[[ "$(jq -r .verdict.structural <<<"$json")" == "Structural: sync group pp1 "* ]] ||
  sf_fail "the unbalanced pipeline is not said structural: $(jq -r .verdict.explanation <<<"$json")"

# A tensor-parallel-like job (tests/eval/workloads/tp_loop.py: 2 tensor ranks x 2 replicas,
# fwd and bwd of kind tensor, all-reduces over the tensor group inside them); rank 3's fwd is
# slowed. Its tensor group (ranks 2, 3, replica 1) finishes fwd together, so the verdict names
# the two together, never one of them (with kind mixed it named rank 1, of the wrong replica).
TP=tp
STAGEFRONTIER_SHM_DIR="$SF_WORK/shm-node0" OMP_NUM_THREADS=1 \
  /usr/bin/python3 -m torch.distributed.run --nproc_per_node 4 --master_port 29663 \
  --rdzv_id "$TP" --redirects 2 --tee 1 --log_dir "$SF_WORK/torchrun-logs-tp" \
  tests/eval/workloads/tp_loop.py --tensor-size 2 --steps 240 \
  --fault fwd:3:8 --fault-start 40 >"$SF_WORK/torchrun-tp.log" 2>&1 || sf_fail "torchrun (tp)"
sf_wait_steps "$TP" 240 30 || sf_fail "steps (tp)"
sf_ctl suspects --job "$TP"
json=$(sf_ctl --json suspects --job "$TP")
tp_summary=$(jq -c '{label: .verdict.label, reason: .verdict.reason,
  candidates: .verdict.candidate_ranks, stages: .verdict.candidate_stages,
  suspects: [.verdict.suspects[:3][] | {stage, rank}]}' <<<"$json")
echo "tensor-parallel job: $tp_summary"
[ "$(jq -r .verdict.label <<<"$json")" = AMBIGUOUS ] || sf_fail "tp: not AMBIGUOUS: $tp_summary"
[ "$(jq -c .verdict.candidate_ranks <<<"$json")" = "[2,3]" ] ||
  sf_fail "tp: candidates not the tensor group [2,3]: $tp_summary"
[ "$(jq -c .verdict.candidate_stages <<<"$json")" = '["fwd"]' ] ||
  sf_fail "tp: candidate stage not fwd: $tp_summary"
jq -r .verdict.explanation <<<"$json" | grep "^Tensor group: ranks 2, 3" >/dev/null ||
  sf_fail "tp: the explanation does not name the tensor group: $(jq -r .verdict.explanation <<<"$json")"
echo PASS
