// `stagefrontier analyze RUN.jsonl [--json] [--window N]`: accounts a recorded run and prints
// the report. Exit codes: 0 report printed, 1 usage error, 2 bad input (nothing printed to
// stdout), 3 internal error.
#include <CLI/CLI.hpp>
#include <iostream>

#include "daemon/accounting/engine.h"
#include "daemon/analyze/report_render.h"
#include "daemon/analyze/run_file.h"

namespace stagefrontier {
namespace {

int Analyze(const std::string& path, bool as_json, int window) {
  absl::StatusOr<RecordedRun> run = ReadRunFile(path);
  if (!run.ok()) {
    std::cerr << "stagefrontier analyze: " << run.status().message() << "\n";
    return 2;
  }
  JobConfig job{*run->schema, run->world_size, run->groups, EngineConfig{}};
  job.engine.window_steps = window;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(job);
  if (!engine.ok()) {
    std::cerr << "stagefrontier analyze: " << engine.status().message() << "\n";
    return 2;
  }
  std::vector<Verdict> windows;
  for (const auto& [step, input] : run->steps) {
    if (absl::Status s = (*engine)->AddStep(input); !s.ok()) {
      std::cerr << "stagefrontier analyze: " << path << ": " << s.message() << "\n";
      return 2;
    }
    for (Verdict& v : (*engine)->TakeClosedVerdicts()) windows.push_back(std::move(v));
  }
  RunInfo info{path, run->job, run->world_size, static_cast<int64_t>(run->steps.size()),
               run->records};
  const JobReport report = (*engine)->Report();
  std::cout << (as_json ? RenderReportJson(info, *run->schema, report, windows)
                        : RenderReportText(info, *run->schema, report, windows));
  return 0;
}

}  // namespace
}  // namespace stagefrontier

int main(int argc, char** argv) {
  CLI::App app{"StageFrontier: which stage on which rank is slowing the group down"};
  app.require_subcommand(1);
  CLI::App* analyze =
      app.add_subcommand("analyze", "Account a recorded run (JSON Lines) and print the report");
  std::string path;
  bool as_json = false;
  int window = 100;
  analyze
      ->add_option("run", path, "Recorded run, one JSON record per rank-step (docs/run-format.md)")
      ->required();
  analyze->add_flag("--json", as_json, "Print the report as JSON");
  analyze->add_option("--window", window, "Steps per verdict window")->check(CLI::Range(2, 100000));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }
  return stagefrontier::Analyze(path, as_json, window);
}
