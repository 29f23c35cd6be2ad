# Shell functions that run the real StageFrontier pipeline on one machine: a coordinator, one
# sidecar per simulated node (each with its own segment directory), and synthetic trainer
# processes. Sourced by run_demo.sh and by the end-to-end tests.
#
#   source deploy/demo/pipeline.sh
#   sf_init /tmp/run1 bazel-bin        # work directory, where the binaries are
#   sf_start_coordinator 7311 7312
#   sf_start_sidecar node0 7311; sf_start_sidecar node1 7311
#   sf_run_trainers job1 16 2 200 --fault data:11:15 --fault-start 40    # waits for them
#   sf_stop_all

sf_init() {
  SF_WORK=$1
  SF_BIN=$2
  mkdir -p "$SF_WORK"
  SF_PIDS=()
  SF_CTL_FLAGS=()  # e.g. (--tls-ca ca.pem --token-file token) for a secured coordinator
  SF_TRAINER_ENV=()  # extra VAR=value for the trainers, e.g. (LD_PRELOAD=.../libsfprobe.so)
}

# sf_start_coordinator GRPC_PORT METRICS_PORT [extra flags...]
sf_start_coordinator() {
  local port=$1 mport=$2
  shift 2
  mkdir -p "$SF_WORK/data"
  "$SF_BIN/daemon/coordinator/stagefrontier-coordinator" --listen "127.0.0.1:$port" \
    --metrics-listen "127.0.0.1:$mport" --data-dir "$SF_WORK/data" "$@" \
    >>"$SF_WORK/coordinator.log" 2>&1 &
  SF_COORD_PID=$!
  SF_COORD="127.0.0.1:$port"
  local i
  for i in $(seq 100); do
    sf_ctl --timeout 1 jobs >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "coordinator did not come up; its log:" >&2
  cat "$SF_WORK/coordinator.log" >&2
  return 1
}

# sf_start_sidecar NODE [extra flags...]: drains $SF_WORK/shm-NODE.
sf_start_sidecar() {
  local node=$1
  shift
  mkdir -p "$SF_WORK/shm-$node"
  "$SF_BIN/daemon/sidecar/stagefrontier-sidecar" --coordinator "$SF_COORD" --node "$node" \
    --shm-dir "$SF_WORK/shm-$node" "$@" >>"$SF_WORK/sidecar-$node.log" 2>&1 &
  eval "SF_SIDECAR_PID_$node=$!"
}

# sf_spawn_trainers JOB WORLD NODES STEPS [trainer flags...]: starts WORLD processes, ranks
# spread over NODES nodes (node = rank / (WORLD / NODES)); pids in SF_TRAINER_PIDS.
sf_spawn_trainers() {
  local job=$1 world=$2 nodes=$3 steps=$4
  shift 4
  local per=$((world / nodes)) r
  rm -f "$SF_WORK/$job.barrier"
  SF_TRAINER_PIDS=()
  for ((r = 0; r < world; r++)); do
    local node="node$((r / per))"
    mkdir -p "$SF_WORK/shm-$node"
    env "${SF_TRAINER_ENV[@]}" STAGEFRONTIER_SHM_DIR="$SF_WORK/shm-$node" TORCHELASTIC_RUN_ID=$job RANK=$r \
      LOCAL_RANK=$((r % per)) WORLD_SIZE=$world LOCAL_WORLD_SIZE=$per \
      "$SF_BIN/client/examples/synthetic_trainer" --steps "$steps" \
      --barrier "$SF_WORK/$job.barrier" "$@" >>"$SF_WORK/trainer-$job.log" 2>&1 &
    SF_TRAINER_PIDS+=($!)
  done
}

sf_wait_trainers() {
  local p rc=0
  for p in "${SF_TRAINER_PIDS[@]}"; do wait "$p" || rc=1; done
  return $rc
}

sf_run_trainers() {
  sf_spawn_trainers "$@"
  sf_wait_trainers
}

# sf_wait_steps JOB N [TIMEOUT_S]: until the coordinator accounted N steps of JOB.
sf_wait_steps() {
  local job=$1 want=$2 timeout=${3:-30} i got
  for ((i = 0; i < timeout * 10; i++)); do
    got=$(sf_ctl --json jobs | jq -r --arg j "$job" \
      '[.jobs[] | select(.job == $j) | .steps_accounted | tonumber] | first // 0')
    [ "${got:-0}" -ge "$want" ] && return 0
    sleep 0.1
  done
  echo "job $job: ${got:-0} of $want steps accounted after ${timeout}s" >&2
  return 1
}

# sf_fail MESSAGE: for tests: says why, shows the end of every log in the work directory, exits 1.
sf_fail() {
  echo "FAIL: $*" >&2
  tail -n 30 "$SF_WORK"/*.log >&2
  exit 1
}

# sf_torch_env [PYDIR]: for the tests that run real PyTorch (from the runfiles root) and the
# demo: ends the script as SKIPPED (exit 0, with the reason) without python3-torch; otherwise
# puts the built `stagefrontier` package (PYDIR, default client/python: the runfiles' copy) on
# PYTHONPATH and, when it was built with ASan, preloads the sanitizer runtimes into Python.
sf_torch_env() {
  if ! /usr/bin/python3 -c "import torch.distributed" 2>/dev/null; then
    echo "SKIPPED: python3-torch is not installed (deploy/install-deps.sh installs it)"
    exit 0
  fi
  export PYTHONPATH="${1:-$PWD/client/python}"
  local rt
  rt=$(sf_asan_runtimes "$PYTHONPATH/stagefrontier/_stagefrontier.so")
  if [ -n "$rt" ]; then
    export LD_PRELOAD="${rt// /:}"
    export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
  fi
}

# sf_torch_ranks JOB WORLD PORT ARGS...: WORLD ranks of client/examples/ddp_example.py (Gloo
# DDP) under stagefrontier.torch.run on node0, one process each as torchrun's workers
# (TORCHELASTIC_RUN_ID=JOB, MASTER_PORT=PORT), in the background; logs $SF_WORK/JOB-rankR.log,
# pids appended to the array `pids`. Needs sf_torch_env first.
sf_torch_ranks() {
  local job=$1 world=$2 port=$3 r
  shift 3
  mkdir -p "$SF_WORK/shm-node0"
  for ((r = 0; r < world; r++)); do
    env STAGEFRONTIER_SHM_DIR="$SF_WORK/shm-node0" TORCHELASTIC_RUN_ID="$job" RANK=$r \
      LOCAL_RANK=$r WORLD_SIZE="$world" LOCAL_WORLD_SIZE="$world" MASTER_ADDR=127.0.0.1 \
      MASTER_PORT="$port" /usr/bin/python3 -m stagefrontier.torch.run \
      client/examples/ddp_example.py "$@" >"$SF_WORK/$job-rank$r.log" 2>&1 &
    pids+=($!)
  done
}

# sf_asan_runtimes LIB: the sanitizer runtimes to preload (space-separated) when LIB was built
# with ASan (--config=asan), nothing otherwise: the runtime must come first in the initial
# library list of a process that loads an instrumented library.
sf_asan_runtimes() {
  if [[ "$(ldd "$1")" == *libasan* ]]; then
    echo "$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
  fi
}

# sf_preload LIB...: the LD_PRELOAD value for LIBs, sanitizer runtimes first if needed.
sf_preload() {
  echo "$(sf_asan_runtimes "$1") $*"
}

sf_ctl() { "$SF_BIN/daemon/sfctl/sfctl" --coordinator "$SF_COORD" "${SF_CTL_FLAGS[@]}" "$@"; }

# sf_metrics PORT: prints the coordinator's /metrics page served on 127.0.0.1:PORT; on failure
# prints nothing on stdout, says why on stderr (refused, timed out, HTTP status) and returns 1.
# Every socket step times out after 5 s and the whole read after 15 s. Python rather than curl:
# CI saw curl hang past its own --max-time in the tests that preload the ASan runtime into
# their children (and once without it, where the cause was never seen); the preload is dropped.
sf_metrics() {
  local rc=0
  env -u LD_PRELOAD timeout -k 2 15 /usr/bin/python3 -c '
import http.client, sys
port = int(sys.argv[1])
try:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", "/metrics")
    r = c.getresponse()
    body = r.read()
except Exception as e:
    sys.exit(f"/metrics on 127.0.0.1:{port}: {type(e).__name__}: {e}")
if r.status != 200:
    sys.exit(f"/metrics on 127.0.0.1:{port}: HTTP {r.status} {r.reason}")
sys.stdout.buffer.write(body)
' "$1" || rc=$?
  [ $rc -lt 124 ] || echo "/metrics on 127.0.0.1:$1: no answer in 15 s" >&2
  return $rc
}

# sf_metric PORT SERIES: one value of that /metrics page as an integer, SERIES being the
# sample's name and labels exactly as exposed (stagefrontier_x_total{reason="idle"}); prints
# nothing when the page has no such sample.
sf_metric() {
  sf_metrics "$1" | awk -v s="$2" '$1 == s { print int($2) }'
}

# Stops every daemon with SIGTERM (they flush), then waits.
sf_stop_all() {
  local v p
  for v in ${!SF_SIDECAR_PID_*}; do
    p=${!v}
    kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null
    unset "$v"
  done
  if [ -n "${SF_COORD_PID:-}" ]; then
    kill -TERM "$SF_COORD_PID" 2>/dev/null && wait "$SF_COORD_PID" 2>/dev/null
    SF_COORD_PID=
  fi
  return 0
}

# sf_demo_hold URL: with SF_DEMO_HOLD set, holds until Enter, or, without a terminal (a demo run
# in the background), until the file $SF_WORK/go-on appears; SF_DEMO_HOLD=N (N > 1) holds N
# seconds at most either way. Without it, says how to hold.
sf_demo_hold() {
  local url=$1 limit=0
  if [ -z "${SF_DEMO_HOLD:-}" ]; then
    echo "(SF_DEMO_HOLD=1 ./run.sh demo keeps it up here for a look at $url)"
    return 0
  fi
  [[ "$SF_DEMO_HOLD" =~ ^[0-9]+$ ]] && [ "$SF_DEMO_HOLD" -gt 1 ] && limit=$SF_DEMO_HOLD
  if [ -t 0 ]; then
    if [ "$limit" -gt 0 ]; then
      read -r -t "$limit" -p "== the web view is up at $url; press Enter to go on (${limit} s) " _ \
        || echo
    else
      read -r -p "== the web view is up at $url; press Enter to go on " _
    fi
    return 0
  fi
  echo "== the web view is up at $url; holding until 'touch $SF_WORK/go-on'" \
    "$([ "$limit" -gt 0 ] && echo "or ${limit} s")"
  local start=$SECONDS
  until [ -e "$SF_WORK/go-on" ] || { [ "$limit" -gt 0 ] && [ $((SECONDS - start)) -ge "$limit" ]; }; do
    sleep 0.2
  done
}
