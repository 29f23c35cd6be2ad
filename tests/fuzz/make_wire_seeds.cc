// Writes seed inputs for the ingest_batch, journal, capture_chunk, record_block and
// summary_block fuzz targets:
// a batch as a sidecar sends it, a small journal as the coordinator writes it (and the same
// journal compacted into record blocks), the chunks of a small capture file as a sidecar sends
// them, a record block, and the small journal's step summaries as a summary block.
//   make_wire_seeds OUT_DIR   (writes OUT_DIR/ingest_batch/seed0.bin,
//   OUT_DIR/journal/seed0.journal, OUT_DIR/journal/seed_blocks.journal,
//   OUT_DIR/capture_chunk/seed{0,1}.bin, OUT_DIR/record_block/seed0.bin,
//   OUT_DIR/summary_block/seed0.bin)
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "daemon/archive/record_block.h"
#include "daemon/archive/summary_block.h"
#include "daemon/captures/capture_compression.h"
#include "daemon/coordinator/job_state.h"
#include "daemon/journal/journal_compaction.h"
#include "daemon/wire/packed_steps.h"
#include "daemon/wire/rank_steps.h"
#include "stagefrontier/v1/captures.pb.h"

namespace {
using namespace stagefrontier;

v1::RankSteps Steps(int rank, int first, int last) {
  wire::PackedStepsEncoder e(3);
  for (int s = first; s <= last; ++s) {
    const int64_t d[] = {4'000'000 + 1000 * s, rank == 1 ? 9'000'000 : 300'000, 3'000'000};
    e.Add(s, d, s % 3);
  }
  return wire::MakeRankSteps("seed", rank, e);
}

v1::RankDeclaration Decl(int rank) {
  v1::RankDeclaration d;
  d.set_job("seed");
  d.set_rank(rank);
  d.set_world_size(2);
  const char* names[] = {"data", "grad_sync", "optimizer"};
  const v1::StageKind kinds[] = {v1::STAGE_KIND_IO, v1::STAGE_KIND_SYNC, v1::STAGE_KIND_COMPUTE};
  for (int k = 0; k < 3; ++k) {
    v1::Stage* s = d.add_stages();
    s->set_name(names[k]);
    s->set_kind(kinds[k]);
  }
  return d;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  std::filesystem::create_directories(out + "/ingest_batch");
  std::filesystem::create_directories(out + "/journal");
  v1::SidecarMessage m;
  for (int r = 0; r < 2; ++r) *m.mutable_batch()->add_declarations() = Decl(r);
  for (int r = 0; r < 2; ++r) *m.mutable_batch()->add_steps() = Steps(r, 0, 5);
  std::ofstream(out + "/ingest_batch/seed0.bin", std::ios::binary) << m.SerializeAsString();

  std::filesystem::create_directories(out + "/capture_chunk");
  const std::string trace =
      "{\"traceEvents\": [{\"name\": \"ProfilerStep#5\", \"ph\": \"X\", \"ts\": 1, \"dur\": 9}]}";
  for (int k = 0; k < 2; ++k) {
    const size_t half = trace.size() / 2;
    v1::CaptureChunk c;
    c.set_job("seed");
    c.set_node("node0");
    c.set_file_name("trace_rank1_step5.json");
    c.set_file_bytes(trace.size());
    c.set_offset(k == 0 ? 0 : half);
    c.set_raw_bytes(static_cast<uint32_t>(k == 0 ? half : trace.size() - half));
    c.set_data(DeflateChunk(std::string_view(trace).substr(c.offset(), c.raw_bytes())));
    std::ofstream(out + "/capture_chunk/seed" + std::to_string(k) + ".bin", std::ios::binary)
        << c.SerializeAsString();
  }

  JobOptions o;
  o.data_dir = out + "/journal";
  o.fsync = false;
  o.engine.window_steps = 4;
  o.engine.warmup_steps = 2;
  o.engine.baseline_steps = 4;
  o.aligner.deadline_ns = 1;
  auto job = JobState::Create(Decl(0), o, nullptr);
  if (!job.ok()) return 1;
  int64_t now = 10;
  for (int chunk = 0; chunk < 3; ++chunk) {
    for (int r = 0; r < 2; ++r) {
      if (!(*job)->Ingest(Steps(r, chunk * 4, chunk * 4 + 3), "n", now).ok()) return 1;
    }
    (*job)->CloseDue(now += 10);
  }
  if (!(*job)->Flush().ok()) return 1;
  {
    v1::GetStepsReply steps;
    (*job)->Steps(0, INT64_MAX, 1000, &steps);
    const std::vector<v1::StepSummary> summaries(steps.steps().begin(), steps.steps().end());
    auto block =
        EncodeSummaryBlock(summaries, {.stage_count = static_cast<uint32_t>(steps.stages_size())});
    if (!block.ok()) return 1;
    std::filesystem::create_directories(out + "/summary_block");
    std::ofstream(out + "/summary_block/seed0.bin", std::ios::binary) << *block;
  }
  job->reset();
  std::filesystem::rename(JournalPath(o.data_dir, "seed"), out + "/journal/seed0.journal");
  std::filesystem::remove(out + "/journal/seed_blocks.journal");
  if (!CompactJournal(out + "/journal/seed0.journal", out + "/journal/seed_blocks.journal",
                      {.block_steps = 4, .fsync = false})
           .ok()) {
    return 1;
  }

  std::filesystem::create_directories(out + "/record_block");
  std::vector<v1::JournalRecord> records(4);
  for (int r = 0; r < 2; ++r) *records[0].mutable_ranks()->add_steps() = Steps(r, 0, 2);
  records[1].mutable_closed()->set_step(0);
  records[2].mutable_pause()->set_paused(true);
  for (int r = 0; r < 2; ++r) *records[3].mutable_ranks()->add_steps() = Steps(r, 3, 4);
  auto block = EncodeRecordBlock(records, {.stage_count = 3});
  if (!block.ok()) return 1;
  std::ofstream(out + "/record_block/seed0.bin", std::ios::binary) << *block;
  return 0;
}
