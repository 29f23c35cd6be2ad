#!/usr/bin/env bash
# Coverage-guided fuzzing with libFuzzer (Debian's clang-14 + libclang-rt-14-dev), outside
# Bazel because the project's Bazel toolchain is GCC. Builds every target in tests/fuzz with
# ASan+UBSan, runs each for SECONDS (default 30) starting from its committed corpus, and keeps
# new inputs in out/fuzz/<target>/ (not in the repository). Exit 0 if no target crashed.
#   tests/fuzz/run_libfuzzer.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-30}
CXX=${CXX_FUZZ:-clang++-14}
command -v "$CXX" >/dev/null || { echo "run_libfuzzer: $CXX not found (deploy/install-deps.sh installs it)" >&2; exit 2; }

absl_libs=$(grep -o '"-labsl_[a-z_]*"' bazel/system/BUILD.bazel | tr -d '"' | tr '\n' ' ')
# The wire targets need the generated protobuf code: let Bazel generate it.
bazel build //proto:v1 >/dev/null 2>&1 || { echo "run_libfuzzer: bazel build //proto:v1 failed" >&2; exit 2; }
gen=bazel-bin/proto/stagefrontier/v1
# -g1: line tables are what a crash report needs; full debug info made every compile slower.
flags=(-std=c++20 -O1 -g1 -I. -Ibazel-bin/proto -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=all)
# Each target's sources are what Bazel says its fuzz library depends on (a hand-kept list went
# stale once: a new file in job_state's deps failed the link in CI). Protos become their
# generated .pb.cc.
sources_of() {
  bazel query "kind('source file', deps(//tests/fuzz:${1}_fuzz))" 2>/dev/null |
    grep -E '^//[^:]*:.*\.(cc|proto)$' |
    sed -E -e 's#^//([^:]*):#\1/#' -e 's#^/##' \
      -e "s#^proto/stagefrontier/v1/(.*)\.proto\$#$gen/\1.pb.cc#"
}

declare -A libs=(
  [ingest_batch]="-lprotobuf"
  [journal]="-lprotobuf -lprometheus-cpp-core -lzstd"
  [record_block]="-lprotobuf -lzstd"
  [summary_block]="-lprotobuf -lzstd"
  [capture_chunk]="-lprotobuf -lz"
)

# FUZZ_TARGETS picks a subset (space-separated); default: every target.
targets=(${FUZZ_TARGETS:-segment_reader segment_live run_file ingest_batch journal trace_reduce operator_profile capture_chunk web_request record_block summary_block})

# Every distinct source is compiled once, on every core, into a directory of this run's own
# (the targets share most of theirs: 125 compiles were 90 sources; one serial clang per target
# took most of CI's fuzzing time). A fresh directory each run: no stale object after a header
# changes.
objs=$(mktemp -d "${TMPDIR:-/tmp}/sf_fuzz_objs.XXXXXX")
trap 'rm -rf "$objs"' EXIT
declare -A srcs_of
for target in "${targets[@]}"; do
  srcs_of[$target]=$(sources_of "$target")
  [ -n "${srcs_of[$target]}" ] || { echo "run_libfuzzer: bazel query found no sources for $target" >&2; exit 2; }
done
object_of() { echo "$objs/$(tr '/' '~' <<<"$1").o"; }
compile_one() {  # compile_one SOURCE: its object, or the compiler's errors and a failed exit
  # shellcheck disable=SC2086
  "$CXX" $cflags -c "$1" -o "$(object_of "$1")" 2>"$(object_of "$1").err" ||
    { echo "run_libfuzzer: compiling $1 failed:" >&2; cat "$(object_of "$1").err" >&2; return 1; }
}
export -f compile_one object_of
cflags="${flags[*]}"  # no flag has a space
export objs CXX cflags
echo "== compiling $(printf '%s\n' "${srcs_of[@]}" | sort -u | wc -l) sources for ${#targets[@]} fuzzers ($(nproc) at a time)"
# shellcheck disable=SC2016
printf '%s\n' "${srcs_of[@]}" | sort -u | xargs -P "$(nproc)" -I{} bash -c 'compile_one "$1"' _ {} ||
  { echo "run_libfuzzer: a compile failed" >&2; exit 2; }

status=0
for target in "${targets[@]}"; do
  work=out/fuzz/$target
  mkdir -p "$work/corpus"
  cp -n tests/fuzz/corpus/$target/* "$work/corpus/" 2>/dev/null || true
  echo "== linking $target with libFuzzer"
  target_objs=()
  while read -r src; do target_objs+=("$(object_of "$src")"); done <<<"${srcs_of[$target]}"
  # shellcheck disable=SC2086
  "$CXX" "${flags[@]}" "${target_objs[@]}" -o "$work/fuzzer" ${libs[$target]:-} $absl_libs -lpthread
  echo "== fuzzing $target for ${seconds}s"
  if ! (cd "$work" && ./fuzzer -max_total_time="$seconds" -max_len=65536 -print_final_stats=1 \
          corpus >fuzz.log 2>&1); then
    echo "run_libfuzzer: $target CRASHED; see $work/fuzz.log and the crash-* file there" >&2
    tail -40 "$work/fuzz.log" >&2
    status=1
  else
    grep -E 'stat::number_of_executed_units|stat::new_units_added|cov:' "$work/fuzz.log" | tail -3
  fi
done
exit $status
