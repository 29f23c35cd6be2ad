#!/usr/bin/env bash
# Installs the Debian 12 packages StageFrontier needs to build and test. Idempotent: prints
# nothing and touches nothing when everything is already installed. Needs root (or sudo).
set -euo pipefail

PACKAGES=(
  bazel-bootstrap    # Bazel 4.2.3, the build (offline: see docs/building.md)
  g++                # C++20
  libabsl-dev        # absl::Status / StatusOr, string helpers
  catch2             # Catch2 v2 tests
  libbenchmark-dev   # Google Benchmark
  libcli11-dev       # command-line flags
  nlohmann-json3-dev # JSON for run files and --json output
  python3-dev        # Python headers for the stub's module (Debian's /usr/bin/python3)
  pybind11-dev       # the stub's Python binding
  clang-14           # libFuzzer builds (tests/fuzz/run_libfuzzer.sh)
  libclang-rt-14-dev # libFuzzer and sanitizer runtimes for clang
  strace             # the stub's no-system-call test
  libgrpc++-dev          # gRPC (sidecar, coordinator, sfctl)
  protobuf-compiler-grpc # grpc_cpp_plugin
  protobuf-compiler      # protoc
  libprotobuf-dev        # protobuf runtime
  libspdlog-dev          # logs
  prometheus-cpp-dev     # the coordinator's /metrics
  zlib1g-dev             # capture files travel compressed (sidecar -> coordinator)
  libzstd-dev            # the journal's compact record blocks (docs/journal-format.md)
  prometheus             # a real Prometheus scrapes /metrics in a test; promtool checks the alert rules
  curl                   # tests talk to Prometheus's HTTP API
  jq                     # tests read --json output
  openssl                # the TLS test makes its certificates
  python3-yaml           # the deployment checks read the Kubernetes manifests
  systemd                # systemd-analyze verifies the units
  python3-torch          # PyTorch (CPU, Gloo) for the stagefrontier.torch tests
  python3-venv           # the wheel test installs the wheel into a fresh virtual environment
  python3-wheel          # the wheel test checks the archive with `wheel unpack`
  libboost-dev           # Boost.Beast: the coordinator's web view (HTTP and HTTPS)
  libssl-dev             # OpenSSL for the web view's HTTPS
  libjs-chart.js         # Chart.js, built into the web view
  chromium               # the web view's browser test (headless)
  chromium-driver        # WebDriver for it
  python3-selenium       # the browser test drives Chromium with Selenium
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
