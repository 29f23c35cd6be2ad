// Measures the per-step frontier summary in summary blocks (docs/journal-format.md "Summary
// blocks"), as a coordinator keeps its step history (StepHistory): restores each journal given
// (JobState::Restore: decode, align, account, decide), takes every step's summary (what
// GetSteps serves) and seals them into blocks of `--block-steps` steps; prints, per journal, the
// bytes per step of the serialized protobufs and of the blocks (the frontier frame alone, the
// detail frame, both), checks that the blocks decode to the same bytes, and the speed of both
// directions. A documented harness, not a test:
//   bazel build -c opt //tests/bench:summary_size_harness
//   bazel-bin/tests/bench/summary_size_harness tests/eval/recorded/*.journal
// (for a simulated 1,024-rank job, pass the journal archive_size_harness writes:
// /tmp/sf_archive_size/sim.journal).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "daemon/archive/summary_block.h"
#include "daemon/coordinator/job_state.h"

namespace {

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace stagefrontier;
  CLI::App app{"Bytes per step of the frontier summary in summary blocks"};
  std::vector<std::string> journals;
  int32_t block_steps = 256;
  int level = 3;
  app.add_option("journals", journals, "journals to restore")->required()->check(CLI::ExistingFile);
  app.add_option("--block-steps", block_steps)->check(CLI::Range(1, 65536));
  app.add_option("--level", level, "zstd level")->check(CLI::Range(1, 19));
  CLI11_PARSE(app, argc, argv);

  // Bytes per step; speeds in millions of steps (summaries) per second.
  std::printf("%-48s %6s %6s %9s %9s %9s %9s %8s %8s\n", "journal", "stages", "steps", "proto",
              "frontier", "detail", "block", "enc M/s", "dec M/s");
  const std::string dir = "/tmp/sf_summary_size";
  for (const std::string& path : journals) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    JobOptions o;
    o.fsync = false;
    o.data_dir = dir;
    o.history_steps = 10'000'000;
    absl::StatusOr<std::unique_ptr<JobState>> job = JobState::Restore(path, o, nullptr, nullptr, 0);
    if (!job.ok()) {
      std::cerr << path << ": " << job.status().message() << "\n";
      return 2;
    }
    std::vector<v1::StepSummary> all;
    uint32_t stages = 0;
    for (int64_t from = 0;;) {
      v1::GetStepsReply page;
      (*job)->Steps(from, INT64_MAX, 1000, &page);
      stages = static_cast<uint32_t>(page.stages_size());
      if (page.steps_size() == 0) break;
      for (v1::StepSummary& s : *page.mutable_steps()) all.push_back(std::move(s));
      from = all.back().step() + 1;
    }
    if (all.empty()) continue;
    uint64_t proto = 0, frontier = 0, detail = 0, block = 0;
    for (const v1::StepSummary& s : all) proto += s.ByteSizeLong();
    std::vector<std::string> blocks;
    auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < all.size(); i += static_cast<size_t>(block_steps)) {
      const size_t n = std::min(all.size() - i, static_cast<size_t>(block_steps));
      SummaryBlockStats stats;
      absl::StatusOr<std::string> b = EncodeSummaryBlock(
          std::span<const v1::StepSummary>(all).subspan(i, n),
          {.stage_count = stages, .zstd_level = level}, &stats);
      if (!b.ok()) {
        std::cerr << path << ": " << b.status().message() << "\n";
        return 2;
      }
      frontier += stats.frontier_bytes;
      detail += stats.detail_bytes;
      block += stats.block_bytes;
      blocks.push_back(*std::move(b));
    }
    const double encode = Since(start);
    start = std::chrono::steady_clock::now();
    std::vector<v1::StepSummary> back;
    for (const std::string& b : blocks) {
      if (absl::Status s = DecodeSummaryBlock(b, &back); !s.ok()) {
        std::cerr << path << ": " << s.message() << "\n";
        return 2;
      }
    }
    const double decode = Since(start);
    const double n = static_cast<double>(all.size());
    std::printf("%-48s %6u %6zu %9.1f %9.1f %9.1f %9.1f %8.2f %8.2f\n",
                std::filesystem::path(path).filename().string().substr(0, 48).c_str(), stages,
                all.size(), proto / n, frontier / n, detail / n, block / n, n / encode / 1e6,
                n / decode / 1e6);
    for (size_t i = 0; i < all.size(); ++i) {
      if (back.size() != all.size() ||
          back[i].SerializeAsString() != all[i].SerializeAsString()) {
        std::cerr << path << ": step " << all[i].step() << " did not come back the same\n";
        return 1;
      }
    }
  }
  std::filesystem::remove_all(dir);
  return 0;
}
