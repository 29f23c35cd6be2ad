#!/usr/bin/env bash
# The main demo on real parts: a coordinator, one sidecar per simulated node, and 16 trainer
# processes (the real stub, timed stage work, a real cross-process barrier at grad_sync) of
# which rank 11's data loader is slowed by 15 ms from step 60. Prints what sfctl says, next
# to what the mean and max dashboards would have said, then shuts everything down.
#   deploy/demo/run_demo.sh [BAZEL_BIN]      (./run.sh demo builds and calls this)
set -euo pipefail
cd "$(dirname "$0")/../.."
source deploy/demo/pipeline.sh
bin=${1:-bazel-bin}
port=${SF_DEMO_PORT:-7311}
rm -rf out/demo
sf_init out/demo "$bin"
trap 'sf_stop_all; kill ${SF_TRAINER_PIDS[@]:-} 2>/dev/null || true' EXIT

echo "== starting the coordinator on 127.0.0.1:$port (metrics on :$((port + 1))) and 2 sidecars"
sf_start_coordinator "$port" "$((port + 1))"
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
sf_ctl health --job demo | head -4
echo
echo "== stopping the sidecars and the coordinator (SIGTERM: they flush and exit)"
sf_stop_all
echo "logs, the coordinator's journal and the segments are under out/demo/"
