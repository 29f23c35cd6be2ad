#!/usr/bin/env bash
# StageFrontier's one entry point. On a fresh Debian 12 machine:
#   ./run.sh demo   install what is missing, build, and run the main demo
#   ./run.sh test   install what is missing, build, and run every test (plain and ASan+UBSan)
# The test command ends with the line "N passed, N failed" and exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")"

usage() { echo "usage: ./run.sh demo | test [--no-asan]" >&2; exit 1; }
[ $# -ge 1 ] || usage

deploy/install-deps.sh

case "$1" in
  demo)
    bazel build -c opt //daemon/sim:stagefrontier-sim //daemon/analyze:stagefrontier
    mkdir -p out/demo
    echo "Simulating 16 data-parallel ranks, 300 steps, clocks hours apart; rank 11's data loader"
    echo "stalls by 30 ms from step 100 (the ground truth is in out/demo/truth.json)."
    echo
    bazel-bin/daemon/sim/stagefrontier-sim --ranks 16 --steps 300 --seed 7 --clock-skew \
      --fault slow:data:rank=11:magnitude=30ms:start=100 \
      --out out/demo/run.jsonl --truth out/demo/truth.json
    bazel-bin/daemon/analyze/stagefrontier analyze out/demo/run.jsonl
    ;;
  test)
    asan=1
    [ "${2:-}" = "--no-asan" ] && asan=0
    passed=0
    failed=0
    count() {  # count one `bazel test` run's per-target results from its log
      local log=$1 p f
      p=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log" || true)
      f=$(grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|FLAKY|INCOMPLETE)' "$log" || true)
      if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then f=1; fi  # nothing ran: the build broke
      passed=$((passed + p))
      failed=$((failed + f))
    }
    log=$(mktemp)
    trap 'rm -f "$log"' EXIT
    echo "== bazel test //... (fastbuild)"
    bazel test //... 2>&1 | tee "$log" || true
    count "$log"
    if [ "$asan" = 1 ]; then
      echo "== bazel test --config=asan //... (AddressSanitizer + UndefinedBehaviorSanitizer)"
      bazel test --config=asan //... 2>&1 | tee "$log" || true
      count "$log"
    fi
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    ;;
  *) usage ;;
esac
