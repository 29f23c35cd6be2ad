#!/usr/bin/env bash
# Builds (-c opt) and gathers what tests/bench/gpu_machine_run.sh needs on a GPU machine that has
# CUDA, NCCL and PyTorch but no Bazel: DIR/bin is a copy of bazel-bin's layout for the few
# binaries it runs, DIR/lib the Debian libraries they link (glibc, libstdc++ and CUDA's own
# stay the machine's), DIR/include Abseil's headers.
#   tests/bench/gpu_prebuilt.sh DIR && tests/bench/gpu_machine_run.sh DIR OUT   # on the GPU machine
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$1
files=(client/probe/libsfprobe.so client/probe/libsfprobe_cuda.so tests/probe/gpu_check
  tests/probe/probe_ring_dump tests/probe/libfake_nccl.so tests/bench/probe_gpu_overhead
  tests/bench/probe_overhead_harness daemon/sweep/stagefrontier-sweep daemon/sweep/libsfsweep_cuda.so)
bazel build -c opt //client/probe:libsfprobe.so //client/probe:cuda_backend \
  //tests/probe:gpu_check_bin //tests/probe:probe_ring_dump //tests/probe:libfake_nccl.so \
  //tests/bench:probe_gpu_overhead //tests/bench:probe_overhead_harness \
  //daemon/sweep:stagefrontier-sweep //daemon/sweep:gpu_checks_cuda
rm -rf "$dir"
mkdir -p "$dir/lib"
for f in "${files[@]}"; do
  install -D -m 755 "bazel-bin/$f" "$dir/bin/$f"
  # The libraries ldd resolves outside the machine's base (glibc, libstdc++, libgcc) and CUDA.
  (ldd "bazel-bin/$f" | awk '$3 ~ /^\// { print $3 }' |
    grep -Ev '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|/cuda|libcuda|libnccl|libcublas|libcudart' || true) |
    while read -r lib; do cp -L -n "$lib" "$dir/lib/"; done
done
# The Abseil headers, for the stub's Python module built there for its python3 (the wheel's
# module is Debian's 3.11): gpu_machine_run.sh step 5.
mkdir -p "$dir/include" && cp -r /usr/include/absl "$dir/include/"
# The module's own sources, so that the build there follows the BUILD files.
bazel query 'kind("source file", deps(//client/python:_stagefrontier.so))' --output=label 2>/dev/null |
  sed -n 's|^//\([^:]*\):\(.*\.cc\)$|\1/\2|p' | sed 's|^/||' > "$dir/module_sources.txt"
test -s "$dir/module_sources.txt"
du -sh "$dir"
