#!/usr/bin/env bash
# StageFrontier's one entry point. On a fresh Debian 12 machine:
#   ./run.sh demo   install what is missing, build, and run the main demo
#   ./run.sh wheel  install what is missing and build the Python wheel into out/dist/
#   ./run.sh install [PREFIX]  build and install the commands into PREFIX/bin (default
#                   /usr/local): stagefrontier-coordinator, -sidecar, sfctl, stagefrontier, ...
#   ./run.sh test   install what is missing, build, and run every test under ASan+UBSan, the
#                   checks only a plain build can make, the probe's CUDA build (and GPU check
#                   where a GPU is), the concurrency tests under TSan, and libFuzzer on every
#                   decoder; --quick: every test in the plain build instead, and no sanitizer or fuzzer
# The test command ends with the line "N passed, N failed" and exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")"

usage() {
  echo "usage: ./run.sh demo | wheel | install [PREFIX] | test [--quick]   (--quick: plain build only)" >&2
  exit 1
}
[ $# -ge 1 ] || usage

deploy/install-deps.sh

case "$1" in
  demo)
    bazel build -c opt //daemon/coordinator:stagefrontier-coordinator \
      //daemon/sidecar:stagefrontier-sidecar //daemon/sfctl:sfctl //client/examples:synthetic_trainer \
      //client/python:package
    deploy/demo/run_demo.sh bazel-bin
    ;;
  wheel)
    bazel build -c opt //client/python:wheel
    mkdir -p out/dist
    cp -f bazel-bin/client/python/stagefrontier-*.whl out/dist/
    ls out/dist/stagefrontier-*.whl
    ;;
  install)
    bazel build -c opt //daemon/coordinator:stagefrontier-coordinator \
      //daemon/sidecar:stagefrontier-sidecar //daemon/sfctl:sfctl //daemon/analyze:stagefrontier \
      //daemon/sweep:stagefrontier-sweep //client/c:libstagefrontier.so
    deploy/install.sh bazel-bin "${2:-/usr/local}"
    ;;
  test)
    full=1
    case "${2:-}" in --quick | --no-asan) full=0 ;; "") ;; *) usage ;; esac
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
    count_checks() {  # a check script's log: its "//pkg:name PASSED|FAILED" lines
      passed=$((passed + $(grep -cE '^//[^ ]+ PASSED' "$1" || true)))
      failed=$((failed + $(grep -cE '^//[^ ]+ FAILED' "$1" || true)))
    }
    log=$(mktemp)
    trap 'rm -f "$log"' EXIT
    if [ "$full" = 1 ]; then
      # Every test runs once, under ASan+UBSan (below). The plain build runs only the tests
      # tagged plain_build: checks the sanitizers' allocators and signal handlers hide
      # (allocation counting, the memory model, the mapping guard's own handler). Running all
      # of them twice put CI past its 90 minutes (plain 24 min, ASan 47 min on 2 cores).
      echo "== bazel test //... tagged plain_build (fastbuild: checks the sanitizers would hide)"
      bazel test --test_tag_filters=plain_build --build_tag_filters=plain_build //... 2>&1 \
        | tee "$log" || true
    else
      echo "== bazel test //... (fastbuild)"
      bazel test //... 2>&1 | tee "$log" || true
    fi
    count "$log"
    echo "== the probe's CUDA backend and the GPU check (tests/probe/cuda_check.sh)"
    tests/probe/cuda_check.sh 2>&1 | tee "$log" || true
    count_checks "$log"
    echo "== the package layers (tests/layers/check.sh)"
    tests/layers/check.sh 2>&1 | tee "$log" || true
    count_checks "$log"
    echo "== no shell pipe into a reader that stops early (tests/lint/shell_pipes.sh)"
    tests/lint/shell_pipes.sh 2>&1 | tee "$log" || true
    count_checks "$log"
    echo "== getting-started and the README's PyTorch section as written, in a fresh clone"
    echo "   (tests/docs/docs_walk.sh)"
    tests/docs/docs_walk.sh 2>&1 | tee "$log" || true  # prints the docs' output: count its own line
    if grep -qx '//tests/docs:docs_walk PASSED' "$log"; then passed=$((passed + 1)); else
      grep -qx '//tests/docs:docs_walk FAILED' "$log" || echo "//tests/docs:docs_walk FAILED"
      failed=$((failed + 1))
    fi
    if [ "$full" = 1 ]; then
      echo "== bazel test --config=asan //... (AddressSanitizer + UndefinedBehaviorSanitizer)"
      bazel test --config=asan //... 2>&1 | tee "$log" || true
      count "$log"
      echo "== bazel test --config=tsan (ThreadSanitizer, tests tagged tsan)"
      bazel test --config=tsan --test_tag_filters=tsan --build_tag_filters=tsan //... 2>&1 \
        | tee "$log" || true
      count "$log"
      echo "== clang -Wthread-safety on the annotated libraries (tests/thread_safety/check.sh)"
      tests/thread_safety/check.sh 2>&1 | tee "$log" || true
      count_checks "$log"
      echo "== libFuzzer, 20 s per decoder (tests/fuzz/run_libfuzzer.sh)"
      if tests/fuzz/run_libfuzzer.sh 20; then
        echo "//tests/fuzz:libfuzzer PASSED"; passed=$((passed + 1))
      else
        echo "//tests/fuzz:libfuzzer FAILED"; failed=$((failed + 1))
      fi
    fi
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    ;;
  *) usage ;;
esac
