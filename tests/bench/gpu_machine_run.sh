#!/usr/bin/env bash
# What this project runs on a lent GPU machine (docs/results.md, "On a GPU"): such a machine
# has CUDA, NCCL and PyTorch but no Bazel, so the binaries are built here with -c opt and
# carried in a copy of bazel-bin (PREBUILT) with the Debian libraries they need (PREBUILT/lib).
#   tests/bench/gpu_machine_run.sh PREBUILT OUT
# 1. the GPU check (tests/probe/cuda_check.sh), 2. the probe's cost on real NCCL
# (probe_gpu_overhead.sh), 3. the probe's cost against the fake libnccl (probe_overhead.sh),
# 4. the node sweep's GPU checks, 5. Kineto captures with CUDA kernels for compare-ops
# (tests/e2e/gpu_operator_traces.py), gzipped into OUT, 6. hang evidence with NCCL: the stacks
# and torch's Flight Recorder dump under a capture id (tests/e2e/gpu_flight_recorder.py).
# STEPS="1 6" runs those steps only (default: all).
set -uo pipefail
cd "$(dirname "$0")/../.."
pre=$(cd "$1" && pwd)
out=$2
mkdir -p "$out"
nvidia-smi -L; python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'
# NCCL and cuBLAS where the machine has them (the CUDA toolkit, or PyTorch's wheels).
libdirs=$(find / -xdev \( -name 'libnccl.so.2' -o -name 'libcublas.so.13' \) 2>/dev/null |
  xargs -r -n1 dirname | sort -u | tr '\n' ':')
export LD_LIBRARY_PATH="$pre/lib:$libdirs/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
steps=" ${STEPS:-1 2 3 4 5 6} "
step() { [[ "$steps" == *" $1 "* ]]; }
if step 1; then
  echo "== 1. cuda_check"
  PREBUILT="$pre/bin" tests/probe/cuda_check.sh
fi
if step 2; then
  echo "== 2. probe_gpu_overhead"
  BIN="$pre/bin" ROUNDS=${ROUNDS:-5} tests/bench/probe_gpu_overhead.sh
fi
if step 3; then
  echo "== 3. probe_overhead (fake libnccl)"
  BIN="$pre/bin" tests/bench/probe_overhead.sh
fi
if step 4; then
  echo "== 4. sweep"
  mkdir -p /tmp/sweep-scratch
  "$pre/bin/daemon/sweep/stagefrontier-sweep" --checks cpu,memory,gpu --scratch /tmp/sweep-scratch
fi
step 5 || step 6 || exit 0
echo "== the stub's Python module"
# The stub's native module for this machine's python3 (Debian's wheel holds one for 3.11).
mkdir -p /tmp/sfpy && cp -r client/python/src/stagefrontier /tmp/sfpy/
echo '__version__ = "0+gpu"' > /tmp/sfpy/stagefrontier/_version.py
ext=$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
g++ -std=c++20 -O2 -shared -fPIC -fvisibility=hidden -I. -isystem "$pre/include" \
  $(python3 -m pybind11 --includes) $(cat "$pre/module_sources.txt") \
  -o "/tmp/sfpy/stagefrontier/_stagefrontier$ext" \
  -L"$pre/lib" $(cd "$pre/lib" && ls libabsl_* | sed 's/^/-l:/') || echo "module build FAILED"
export PYTHONPATH=/tmp/sfpy
if step 6; then
  echo "== 6. hang evidence with NCCL"
  python3 tests/e2e/gpu_flight_recorder.py --work /tmp/sf-flightrec || echo "gpu_flight_recorder FAILED"
fi
step 5 || exit 0
echo "== 5. captures"
for mode in async sync; do
  flag=""; [ $mode = sync ] && flag=--sync
  for rank in 0 1; do
    ms=0; [ $rank = 1 ] && ms=5
    python3 tests/e2e/gpu_operator_traces.py --rank $rank --matmul-ms $ms $flag \
      --out "/tmp/traces_$mode" || echo "gpu_operator_traces rank $rank $mode FAILED"
  done
  for f in /tmp/traces_$mode/*.json; do gzip -c "$f" > "$out/${mode}_$(basename "$f").gz"; done
done
ls -la "$out"
