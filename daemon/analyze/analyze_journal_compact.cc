// stagefrontier journal-compact JOURNAL --out NEW.journal [--block-steps N] [--level L]
// [--round-us] [--json]: the same journal in compact record blocks.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "daemon/analyze/analyze_commands.h"
#include "daemon/journal/journal_compaction.h"

namespace stagefrontier {
namespace {

struct JournalCompactFlags {
  std::string path;
  std::string out_path;
  CompactionOptions options;
  bool round_us = false;
  bool as_json = false;
};

void PrintCompactionJson(const CompactionReport& r, const CompactionOptions& options, double cells,
                         double rank_steps) {
  const RecordBlockStats& t = r.totals;
  nlohmann::json j = {
      {"job", r.job},
      {"stages", r.stages},
      {"duration_unit_ns", options.duration_unit_ns},
      {"input_bytes", r.input_bytes},
      {"output_bytes", r.output_bytes},
      {"blocks", r.blocks},
      {"records", t.records},
      {"record_bytes", t.input_bytes},  // the records serialized, without framing
      {"whole_records", t.whole_records},
      {"rank_steps", t.rank_steps},
      {"rank_stage_steps", t.rank_stage_steps},
      {"input_bytes_per_rank_stage_step", r.input_bytes / cells},
      {"output_bytes_per_rank_stage_step", r.output_bytes / cells},
      {"encode_seconds", r.encode_seconds},
      {"read_back_seconds", r.read_back_seconds},
      {"read_back_rank_steps_per_second", rank_steps / std::max(r.read_back_seconds, 1e-9)}};
  std::cout << j.dump(2) << "\n";
}

int CompactJournalCommand(const JournalCompactFlags& f) {
  CompactionOptions options = f.options;
  if (f.round_us) options.duration_unit_ns = 1000;
  absl::StatusOr<CompactionReport> r = CompactJournal(f.path, f.out_path, options);
  if (!r.ok()) {
    std::cerr << "stagefrontier journal-compact: " << r.status().message() << "\n";
    return r.status().code() == absl::StatusCode::kInternal ? 3 : 2;
  }
  const RecordBlockStats& t = r->totals;
  // Per rank-stage-step: the whole file (declaration, framing and every other record
  // included), so that the figure is what the disk holds.
  const double cells = static_cast<double>(std::max<uint64_t>(t.rank_stage_steps, 1));
  const double rank_steps = static_cast<double>(std::max<uint64_t>(t.rank_steps, 1));
  if (f.as_json) {
    PrintCompactionJson(*r, options, cells, rank_steps);
    return 0;
  }
  std::cout << "job " << r->job << ": " << t.records << " records (" << t.rank_steps
            << " rank-steps x " << r->stages << " stages) in " << r->blocks << " blocks; "
            << t.whole_records << " records kept whole\n"
            << std::fixed << std::setprecision(2) << f.path << ": " << r->input_bytes << " bytes, "
            << r->input_bytes / cells << " per rank-stage-step\n"
            << f.out_path << ": " << r->output_bytes << " bytes, " << r->output_bytes / cells
            << " per rank-stage-step (read back and compared: the same records"
            << (options.duration_unit_ns > 1
                    ? absl::StrCat(", durations rounded to ", options.duration_unit_ns, " ns")
                    : std::string())
            << ")\n"
            << std::setprecision(3) << "blocks built in " << r->encode_seconds
            << " s, read back in " << r->read_back_seconds << " s (" << std::setprecision(0)
            << rank_steps / std::max(r->read_back_seconds, 1e-9) << " rank-steps/s)\n";
  return 0;
}

}  // namespace

Subcommand AddJournalCompactCommand(CLI::App& app) {
  auto f = std::make_shared<JournalCompactFlags>();
  CLI::App* compact = app.add_subcommand(
      "journal-compact",
      "Write a coordinator journal's records in compact record blocks (docs/journal-format.md): "
      "the same records, read back and compared; the coordinator restores either file");
  compact->add_option("journal", f->path, "A <job>.journal file (never modified)")->required();
  compact->add_option("--out", f->out_path, "The new journal (must not exist)")->required();
  compact->add_option("--block-steps", f->options.block_steps, "Closed steps per block")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  compact->add_option("--level", f->options.zstd_level, "zstd level")
      ->check(CLI::Range(1, 19))
      ->capture_default_str();
  compact->add_flag("--round-us", f->round_us,
                    "Round the step records' durations to the nearest microsecond: a lossy, "
                    "smaller archive (each replayed stage differs by at most 0.5 us)");
  compact->add_flag("--json", f->as_json, "Print the figures as JSON");
  return {compact, [f] { return CompactJournalCommand(*f); }};
}

}  // namespace stagefrontier
