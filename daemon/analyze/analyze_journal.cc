// stagefrontier journal JOURNAL [--json] [--window N] [--out RUN.jsonl]: account a
// coordinator journal offline.
#include <iostream>
#include <memory>
#include <sstream>

#include "absl/status/statusor.h"
#include "daemon/analyze/analyze_commands.h"
#include "daemon/analyze/journal_export.h"

namespace stagefrontier {
namespace {

struct JournalFlags {
  std::string path;
  std::string out_path;
  bool as_json = false;
  int window = 100;
};

int Journal(const JournalFlags& f) {
  absl::StatusOr<JournalRun> r = ReadJournalAsRun(f.path);
  if (!r.ok()) {
    std::cerr << "stagefrontier journal: " << r.status().message() << "\n";
    return 2;
  }
  if (!f.out_path.empty() && !WriteRun(f.out_path, r->run, *r->run.schema)) {
    std::cerr << "stagefrontier journal: cannot write " << f.out_path << "\n";
    return 2;
  }
  std::ostringstream text;
  text << "\njournal: " << r->journal_records << " records, " << r->run.records << " rank-steps of "
       << r->run.steps.size() << " steps";
  if (r->refused_rank_steps > 0) text << ", " << r->refused_rank_steps << " refused";
  text << "\n";
  for (const std::string& n : r->notes) text << "note: " << n << "\n";
  nlohmann::json extra = {{"journal_records", r->journal_records},
                          {"skipped_bytes", r->skipped_bytes},
                          {"refused_rank_steps", r->refused_rank_steps},
                          {"notes", r->notes}};
  return AnalyzeRun("journal", f.path, r->run, f.as_json, f.window, text.str(), extra);
}

}  // namespace

Subcommand AddJournalCommand(CLI::App& app) {
  auto f = std::make_shared<JournalFlags>();
  CLI::App* journal = app.add_subcommand(
      "journal",
      "Account a coordinator journal offline (a finished job, or a file recovery kept aside); "
      "--out writes its steps as a run file");
  journal->add_option("journal", f->path, "A <job>.journal file (never modified)")->required();
  journal->add_flag("--json", f->as_json, "Print the report as JSON");
  journal->add_option("--window", f->window, "Steps per verdict window")
      ->check(CLI::Range(2, 100000));
  journal->add_option("--out", f->out_path, "Also write the steps as a run file");
  return {journal, [f] { return Journal(*f); }};
}

}  // namespace stagefrontier
