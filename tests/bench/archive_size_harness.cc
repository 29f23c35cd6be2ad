// Measures the journal's compact record blocks (docs/journal-format.md "Record blocks") on a
// simulated job: writes the journal the coordinator would write for it (one RanksLogged per
// node of 8 ranks and message, `--steps-per-message` steps each, then the steps' closes), then
// compacts it with CompactJournal and prints the bytes per rank-stage-step of both files, the
// time to build the blocks, to read them back, and to restore the job from each file as the
// coordinator does at start (JobState::Restore: decode, align, account, decide). A documented
// harness, not a test:
//   bazel build -c opt //tests/bench:archive_size_harness
//   bazel-bin/tests/bench/archive_size_harness --ranks 1024 --steps 300 [--noise-cv 0.02]
//       [--steps-per-message K] [--level L] [--unit-ns 1000]
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "daemon/coordinator/job_state.h"
#include "daemon/coordinator/proto_convert.h"
#include "daemon/journal/journal_compaction.h"
#include "daemon/journal/record_log.h"
#include "daemon/sim/training_simulator.h"
#include "daemon/wire/rank_steps.h"

int main(int argc, char** argv) {
  using namespace stagefrontier;
  CLI::App app{"Bytes per rank-stage-step of the journal and its compacted copy"};
  int32_t ranks = 1024;
  int64_t steps = 300;
  int32_t per_message = 1;
  double noise_cv = 0.02;
  int level = 12;
  int64_t unit_ns = 1;
  std::string dir = "/tmp/sf_archive_size";
  app.add_option("--ranks", ranks)->check(CLI::Range(8, 1 << 17));
  app.add_option("--steps", steps)->check(CLI::Range(int64_t{1}, int64_t{100'000}));
  app.add_option("--steps-per-message", per_message, "as a sidecar with --batch-delay-ms sends")
      ->check(CLI::Range(1, 64));
  app.add_option("--noise-cv", noise_cv, "each stage's normal noise, a fraction of its mean");
  app.add_option("--level", level, "zstd level")->check(CLI::Range(1, 19));
  app.add_option("--unit-ns", unit_ns, "1: exact; 1000: durations rounded to microseconds")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000}));
  app.add_option("--dir", dir, "where the two journals are written (replaced)");
  CLI11_PARSE(app, argc, argv);

  SimConfig config = SimConfig::DataParallel(ranks);
  config.steps = steps;
  for (SimStage& s : config.stages) s.noise_cv = noise_cv;
  absl::StatusOr<TrainingSimulator> sim = TrainingSimulator::Create(config);
  if (!sim.ok()) {
    std::cerr << sim.status().message() << "\n";
    return 2;
  }
  const uint32_t stages = static_cast<uint32_t>(sim->schema().size());
  std::vector<v1::JournalRecord> records(1);
  v1::JobDeclared* d = records[0].mutable_declared();
  d->set_job("sim");
  d->set_world_size(ranks);
  SchemaToProto(sim->schema(), d->mutable_stages());

  // Each node's encoders collect `per_message` steps, then go out as one RanksLogged.
  constexpr int kRanksPerNode = 8;
  std::vector<wire::PackedStepsEncoder> enc(ranks, wire::PackedStepsEncoder(stages));
  std::vector<int64_t> closes;
  StepInput step;
  int64_t produced = 0;
  while (sim->Next(&step)) {
    for (const RankStep& r : step.ranks) {
      int64_t dur[16];
      for (uint32_t k = 0; k < stages; ++k) dur[k] = r.boundaries_ns[k + 1] - r.boundaries_ns[k];
      enc[r.rank].Add(step.step, dur, 0);
    }
    closes.push_back(step.step);
    if (++produced % per_message != 0 && produced != steps) continue;
    for (int node = 0; node < ranks / kRanksPerNode; ++node) {
      v1::JournalRecord& rec = records.emplace_back();
      for (int r = node * kRanksPerNode; r < (node + 1) * kRanksPerNode; ++r) {
        *rec.mutable_ranks()->add_steps() = wire::MakeRankSteps("sim", r, enc[r]);
        enc[r].Clear();
      }
    }
    for (int64_t s : closes) records.emplace_back().mutable_closed()->set_step(s);
    closes.clear();
  }
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string plain = dir + "/sim.journal", compact = dir + "/sim.compact.journal";
  if (absl::StatusOr<std::unique_ptr<RecordLog>> j = RecordLog::Create(plain, false, records);
      !j.ok()) {
    std::cerr << j.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<CompactionReport> r = CompactJournal(
      plain, compact, {.zstd_level = level, .duration_unit_ns = unit_ns, .fsync = false});
  if (!r.ok()) {
    std::cerr << r.status().message() << "\n";
    return 2;
  }
  // Restore the job from each file, as a coordinator does at start.
  auto restore_seconds = [&](const std::string& path) -> double {
    JobOptions o;
    o.fsync = false;
    o.data_dir = dir;
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::unique_ptr<JobState>> job = JobState::Restore(path, o, nullptr, nullptr, 0);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!job.ok()) {
      std::cerr << path << ": " << job.status().message() << "\n";
      std::exit(2);
    }
    return s;
  };
  const double restore_plain = restore_seconds(plain);
  const double restore_compact = restore_seconds(compact);
  const double cells = static_cast<double>(r->totals.rank_stage_steps);
  std::printf(
      "ranks %d, stages %u, steps %lld, %d step(s) per message, noise cv %.3f, zstd %d, unit %lld "
      "ns\n"
      "journal (format 2, plain)  %12llu bytes  %6.2f bytes per rank-stage-step\n"
      "journal (record blocks)    %12llu bytes  %6.2f bytes per rank-stage-step (%llu blocks)\n"
      "blocks built in %.3f s (%.2f M rank-steps/s), read back in %.3f s (%.2f M rank-steps/s)\n"
      "job restored (replayed and accounted) from the plain journal in %.3f s (%.2f M "
      "rank-steps/s), from the compacted one in %.3f s (%.2f M rank-steps/s)\n",
      ranks, stages, static_cast<long long>(steps), per_message, noise_cv, level,
      static_cast<long long>(unit_ns), static_cast<unsigned long long>(r->input_bytes),
      r->input_bytes / cells, static_cast<unsigned long long>(r->output_bytes),
      r->output_bytes / cells, static_cast<unsigned long long>(r->blocks), r->encode_seconds,
      r->totals.rank_steps / r->encode_seconds / 1e6, r->read_back_seconds,
      r->totals.rank_steps / r->read_back_seconds / 1e6, restore_plain,
      r->totals.rank_steps / restore_plain / 1e6, restore_compact,
      r->totals.rank_steps / restore_compact / 1e6);
  return 0;
}
