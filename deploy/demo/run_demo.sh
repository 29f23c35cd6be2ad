#!/usr/bin/env bash
# The main demo on real parts: a coordinator, one sidecar per simulated node, and 16 trainer
# processes (the real stub, timed stage work, a real cross-process barrier at grad_sync) of
# which rank 11's data loader is slowed by 15 ms from step 60. Prints what sfctl says, next
# to what the mean and max dashboards would have said, then shuts everything down.
# Part 2, from the verdict to the operator: a real PyTorch DDP job (3 Gloo ranks under the
# zero-code-change launcher) whose rank 1 runs extra matrix products in its forward; the
# coordinator runs with --captures, so its verdict makes rank 1 and two reference ranks
# capture the same 5 steps with torch.profiler, the sidecar sends the traces, and the
# coordinator's report names the operator. Skipped where python3-torch is missing.
# Part 1's coordinator also serves the web view (--http-listen, port + 2); SF_DEMO_HOLD=1 keeps
# it up until Enter.
#   deploy/demo/run_demo.sh [BAZEL_BIN]      (./run.sh demo builds and calls this)
set -euo pipefail
cd "$(dirname "$0")/../.."
source deploy/demo/pipeline.sh
bin=${1:-bazel-bin}
port=${SF_DEMO_PORT:-7311}
rm -rf out/demo
sf_init out/demo "$bin"
trap 'sf_stop_all; kill ${SF_TRAINER_PIDS[@]:-} 2>/dev/null || true' EXIT

web="http://127.0.0.1:$((port + 2))/#job=demo"
echo "== starting the coordinator on 127.0.0.1:$port (metrics on :$((port + 1)), web view on"
echo "   $web) and 2 sidecars"
sf_start_coordinator "$port" "$((port + 1))" --http-listen "127.0.0.1:$((port + 2))"
sf_start_sidecar node0
sf_start_sidecar node1
echo "== 16 trainer processes on 2 nodes, 300 steps; the hidden fault: rank 11's data loader"
echo "   is 15 ms slower from step 60 (every other rank waits for it in grad_sync)"
SECONDS=0
sf_run_trainers demo 16 2 300 --fault data:11:15 --fault-start 60
sf_wait_steps demo 300 30
echo "== trainers done in ${SECONDS} s; the coordinator accounted every step"; echo
echo "\$ sfctl jobs"
sf_ctl jobs
echo
echo "\$ sfctl suspects --job demo"
sf_ctl suspects --job demo
echo
echo "\$ sfctl health --job demo   (first lines)"
sf_ctl health --job demo | sed -n 1,4p
echo
sf_demo_hold "$web"
echo "== stopping the sidecars and the coordinator (SIGTERM: they flush and exit)"
sf_stop_all
echo
echo "== part 2: from the verdict to the operator. PyTorch DDP, 3 Gloo ranks under"
echo "   python3 -m stagefrontier.torch.run; rank 1's forward does ~6 ms of extra matrix"
echo "   products; the coordinator runs with --captures"
sf_torch_env "$PWD/$bin/client/python"
sf_start_coordinator "$port" "$((port + 1))" --captures --capture-cooldown-windows 1000
sf_start_sidecar node0 --capture-dir "$SF_WORK/captures"
mkdir -p "$SF_WORK/shm-node0"
STAGEFRONTIER_SHM_DIR="$SF_WORK/shm-node0" STAGEFRONTIER_CAPTURE_DIR="$SF_WORK/captures" \
  OMP_NUM_THREADS=1 /usr/bin/python3 -m torch.distributed.run --nproc_per_node 3 \
  --master_port "$((port + 2))" --rdzv_id ops --redirects 2 --tee 1 \
  --log_dir "$SF_WORK/torchrun-logs" -m stagefrontier.torch.run \
  client/examples/ddp_example.py --steps 600 --fault matmul:1:6 >"$SF_WORK/torchrun.log" 2>&1 &
SF_TRAINER_PIDS=($!)
for ((i = 0; i < 1200; i++)); do
  grep -q "capture 1 of job ops analysed\|capture 1 of job ops not analysed" \
    "$SF_WORK/coordinator.log" && break
  sleep 0.1
done
wait "${SF_TRAINER_PIDS[0]}" || echo "(torchrun failed: $SF_WORK/torchrun.log)"
echo "\$ sfctl suspects --job ops"
sf_ctl suspects --job ops | sed -n 1,3p
echo
echo "\$ sfctl captures --job ops   (first lines)"
sf_ctl captures --job ops | sed -n 1,3p
echo
echo "\$ sfctl capture-report --job ops --capture 1"
sf_ctl capture-report --job ops --capture 1 --wait 30 || true
echo
echo "== stopping (sfctl capture-fetch --job ops --capture 1 gets the traces for Perfetto)"
sf_stop_all
echo "logs, the coordinator's journal and the segments are under out/demo/"
