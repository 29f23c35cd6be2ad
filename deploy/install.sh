#!/usr/bin/env bash
# Installs StageFrontier's commands and the C ABI's library from a build tree:
#   deploy/install.sh BUILD_DIR [PREFIX]     (./run.sh install builds with -c opt and calls it)
# PREFIX (default /usr/local) gets bin/ stagefrontier-coordinator, stagefrontier-sidecar, sfctl,
# stagefrontier, stagefrontier-sweep (and the sweep's GPU plugin when it was built);
# lib/libstagefrontier.so; include/stagefrontier_c.h. Files are copied, so later builds (a
# fastbuild moves bazel-bin) do not change what is installed. Prints what it installed.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: deploy/install.sh BUILD_DIR [PREFIX]}
prefix=${2:-/usr/local}
bins=(daemon/coordinator/stagefrontier-coordinator daemon/sidecar/stagefrontier-sidecar
      daemon/sfctl/sfctl daemon/analyze/stagefrontier daemon/sweep/stagefrontier-sweep)
for b in "${bins[@]}" client/c/libstagefrontier.so; do
  [ -f "$build/$b" ] || { echo "install: $build/$b is missing: build it first (./run.sh install)" >&2; exit 1; }
done
mkdir -p "$prefix/bin" "$prefix/lib" "$prefix/include"
for b in "${bins[@]}"; do
  install -m 755 "$build/$b" "$prefix/bin/"
done
# The sweep loads its GPU checks from its own directory (built where CUDA is).
if [ -f "$build/daemon/sweep/libsfsweep_cuda.so" ]; then
  install -m 755 "$build/daemon/sweep/libsfsweep_cuda.so" "$prefix/bin/"
fi
install -m 755 "$build/client/c/libstagefrontier.so" "$prefix/lib/"
install -m 644 client/c/stagefrontier_c.h "$prefix/include/"
if [ "$(id -u)" = 0 ] && [ "$prefix" = /usr/local ] && command -v ldconfig >/dev/null; then
  ldconfig
fi
echo "installed into $prefix: bin/{$(printf '%s,' "${bins[@]##*/}" | sed 's/,$//')}," \
  "lib/libstagefrontier.so, include/stagefrontier_c.h"
