#!/usr/bin/env bash
# stagefrontier.torch infers a 3D-parallel layout from the process group a script gives to
# DDP: 4 Gloo ranks under torchrun and `-m stagefrontier.torch.run`, whose script
# (torch_subgroup_ddp.py) builds DDP over new_group([0, 1]) or new_group([2, 3]) and declares
# nothing. Each rank must say what it inferred, the real coordinator must form the sync
# groups pp0 (ranks 0, 1) and pp1 (ranks 2, 3) from what the ranks declared, and sfctl health
# must say that the layout was inferred.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_torch_env
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/torch-layout" .
trap 'sf_stop_all' EXIT

JOB=subgroups
sf_start_coordinator 17491 17492 --step-deadline-ms 10000 || sf_fail "coordinator"
sf_start_sidecar node0
mkdir -p "$SF_WORK/shm-node0"
# --redirects/--tee: see e2e_torch_ddp_test.sh (torch 1.13 on Python 3.11).
STAGEFRONTIER_SHM_DIR="$SF_WORK/shm-node0" OMP_NUM_THREADS=1 \
  /usr/bin/python3 -m torch.distributed.run --nproc_per_node 4 --master_port 29671 \
  --rdzv_id "$JOB" --redirects 2 --tee 1 --log_dir "$SF_WORK/torchrun-logs" \
  -m stagefrontier.torch.run tests/e2e/torch_subgroup_ddp.py --steps 60 \
  >"$SF_WORK/torchrun.log" 2>&1 || sf_fail "torchrun"
# The ranks' stderr is in torchrun's log directory (--tee 1 shows their stdout only).
said=$(cat "$SF_WORK/torchrun-logs"/*/attempt_*/*/stderr.log)
grep stagefrontier <<<"$said" || true
for r in 0 1 2 3; do
  s=$((r / 2))
  grep -q "rank $r: inferred pipeline_stage=$s,pipeline_stages=2,tensor_rank=0,tensor_size=1 from DDP group" \
    <<<"$said" || sf_fail "rank $r did not say it inferred pipeline stage $s of 2"
done
sf_wait_steps "$JOB" 60 30 || sf_fail "steps"
health=$(sf_ctl health --job "$JOB")
echo "$health" | grep "sync groups" || true
json=$(sf_ctl --json health --job "$JOB")
groups=$(jq -c '[.sync_groups[] | {name, ranks: [.ranks[] | tonumber]}]' <<<"$json")
echo "sync groups: $groups"
[ "$groups" = '[{"name":"pp0","ranks":[0,1]},{"name":"pp1","ranks":[2,3]}]' ] ||
  sf_fail "sync groups $groups, not pp0 (0, 1) and pp1 (2, 3): $health"
# sfctl health says how the ranks came by it (the slots' layout source).
grep -q "^layout: ranks 0-3 inferred by stagefrontier.torch from their DDP process group$" \
  <<<"$health" || sf_fail "sfctl health does not say ranks 0-3 inferred their layout: $health"
echo PASS
