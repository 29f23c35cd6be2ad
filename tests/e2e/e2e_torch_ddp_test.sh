#!/usr/bin/env bash
# Real PyTorch DDP (Debian's python3-torch, Gloo, CPU) under torchrun with 4 ranks, the
# example trainer unchanged and instrumented by `-m stagefrontier.torch.run`; rank 2's data
# loader is slowed by 25 ms from step 40. Through the real stub, sidecar and coordinator,
# `sfctl suspects --json` must name (data, 2) among the top two suspects.
set -euo pipefail
source deploy/demo/pipeline.sh
sf_torch_env
sf_init "${TEST_TMPDIR:-$(mktemp -d)}/torch" .
# Debian 12's torch 1.13 on Python 3.11 cannot parse torchrun's default --redirects/--tee of 0
# (IntFlag iteration changed in 3.11); any nonzero value works around it.
trap 'sf_stop_all' EXIT

sf_start_coordinator 17371 17372 --step-deadline-ms 10000 || sf_fail "coordinator"
sf_start_sidecar node0
mkdir -p "$SF_WORK/shm-node0"
# torchrun sets TORCHELASTIC_RUN_ID from --rdzv_id (default "none"): name the job there.
STAGEFRONTIER_SHM_DIR="$SF_WORK/shm-node0" OMP_NUM_THREADS=1 \
  /usr/bin/python3 -m torch.distributed.run --nproc_per_node 4 --master_port 29611 \
  --rdzv_id ddp --redirects 2 --tee 1 --log_dir "$SF_WORK/torchrun-logs" -m stagefrontier.torch.run client/examples/ddp_example.py --steps 240 \
  --fault data:2:25 --fault-start 40 >"$SF_WORK/torchrun.log" 2>&1 || sf_fail "torchrun"
cat "$SF_WORK/torchrun.log" | grep ddp_example || true
sf_wait_steps ddp 240 30 || sf_fail "steps"
sf_ctl suspects --job ddp
json=$(sf_ctl --json suspects --job ddp)
top2=$(jq -r '[.verdict.suspects[:2][] | "\(.stage):\(.rank)"] | join(" ")' <<<"$json")
echo "top two suspects: $top2 ($(jq -r .verdict.label <<<"$json"))"
[[ " $top2 " == *" data:2 "* ]] || sf_fail "(data, 2) not in the top two: $top2"
health=$(sf_ctl --json health --job ddp)
# Reporting, or finished once the sidecar saw the exited stubs' slots released.
[ "$(jq '[.ranks[] | select(.state == "reporting" or .state == "finished")] | length' \
  <<<"$health")" = 4 ] || sf_fail "4 ranks reporting or finished: $health"
echo PASS
