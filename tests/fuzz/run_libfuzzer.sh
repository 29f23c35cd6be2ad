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
flags=(-std=c++20 -O1 -g -I. -Ibazel-bin/proto -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=all)
accounting=$(ls daemon/accounting/*.cc | tr '\n' ' ')

declare -A sources=(
  [segment_reader]="tests/fuzz/segment_reader_fuzz.cc shm/segment_view.cc shm/segment_reader.cc shm/slot_ownership.cc shm/open_stage.cc shm/probe_ring_reader.cc"
  [segment_live]="tests/fuzz/segment_live_fuzz.cc shm/segment_view.cc shm/segment_reader.cc shm/slot_ownership.cc shm/open_stage.cc shm/probe_ring_reader.cc"
  [run_file]="tests/fuzz/run_file_fuzz.cc daemon/analyze/run_file.cc shm/stage_schema.cc daemon/accounting/step_input.cc"
  [trace_reduce]="tests/fuzz/trace_reduce_fuzz.cc daemon/captures/chrome_trace.cc daemon/captures/trace_reduce.cc shm/stage_schema.cc"
  [operator_profile]="tests/fuzz/operator_profile_fuzz.cc daemon/captures/chrome_trace.cc daemon/captures/operator_profile.cc daemon/captures/operator_compare.cc daemon/captures/trace_reduce.cc daemon/accounting/robust_stats.cc shm/stage_schema.cc"
  [ingest_batch]="tests/fuzz/ingest_batch_fuzz.cc daemon/wire/packed_steps.cc $gen/ingest.pb.cc"
  [capture_chunk]="tests/fuzz/capture_chunk_fuzz.cc daemon/captures/capture_store.cc daemon/common/fd_io.cc daemon/captures/capture_compression.cc daemon/captures/capture_file_name.cc $gen/captures.pb.cc"
  [web_request]="tests/fuzz/web_request_fuzz.cc daemon/web/query_string.cc"
  [record_block]="tests/fuzz/record_block_fuzz.cc daemon/archive/record_block.cc daemon/archive/column_codec.cc daemon/wire/packed_steps.cc $gen/ingest.pb.cc $gen/query.pb.cc $gen/journal.pb.cc"
  [summary_block]="tests/fuzz/summary_block_fuzz.cc daemon/archive/summary_block.cc daemon/archive/column_codec.cc $gen/ingest.pb.cc $gen/query.pb.cc"
  [journal]="tests/fuzz/journal_fuzz.cc shm/stage_schema.cc daemon/coordinator/job_journal.cc daemon/journal/journal_file_io.cc daemon/journal/journal_frame.cc daemon/journal/journal_reader.cc daemon/journal/record_log.cc daemon/archive/record_block.cc daemon/archive/column_codec.cc daemon/archive/summary_block.cc daemon/coordinator/step_history.cc daemon/coordinator/journal_compactor.cc daemon/archive/record_block_builder.cc daemon/coordinator/job_state.cc daemon/coordinator/stall_watch.cc daemon/coordinator/resource_limits.cc daemon/common/log_safe.cc daemon/common/duration_format.cc daemon/journal/crc32c.cc daemon/coordinator/proto_convert.cc daemon/coordinator/step_aligner.cc daemon/coordinator/coordinator_metrics.cc daemon/coordinator/detector_health.cc daemon/coordinator/job_layout.cc daemon/nodes/node_shift.cc daemon/nodes/node_verdict.cc daemon/nodes/node_window.cc daemon/nodes/node_ledger.cc daemon/nodes/node_class.cc daemon/nodes/node_name.cc daemon/sweep/fleet_baseline.cc daemon/wire/packed_steps.cc $accounting $gen/ingest.pb.cc $gen/query.pb.cc $gen/journal.pb.cc"
)
declare -A libs=(
  [ingest_batch]="-lprotobuf"
  [journal]="-lprotobuf -lprometheus-cpp-core -lzstd"
  [record_block]="-lprotobuf -lzstd"
  [summary_block]="-lprotobuf -lzstd"
  [capture_chunk]="-lprotobuf -lz"
)

status=0
# FUZZ_TARGETS picks a subset (space-separated); default: every target.
for target in ${FUZZ_TARGETS:-segment_reader segment_live run_file ingest_batch journal trace_reduce operator_profile capture_chunk web_request record_block summary_block}; do
  work=out/fuzz/$target
  mkdir -p "$work/corpus"
  cp -n tests/fuzz/corpus/$target/* "$work/corpus/" 2>/dev/null || true
  echo "== building $target with libFuzzer"
  # shellcheck disable=SC2086
  "$CXX" "${flags[@]}" ${sources[$target]} -o "$work/fuzzer" ${libs[$target]:-} $absl_libs -lpthread
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
