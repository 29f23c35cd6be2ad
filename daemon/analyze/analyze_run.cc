// stagefrontier analyze RUN.jsonl [--json] [--window N]: account a recorded run.
#include <fstream>
#include <iostream>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/accounting/engine.h"
#include "daemon/analyze/analyze_commands.h"
#include "daemon/analyze/report_render.h"

namespace stagefrontier {

int AnalyzeRun(const std::string& command, const std::string& label, const RecordedRun& run,
               bool as_json, int window, const std::string& extra_text,
               const nlohmann::json& extra_json) {
  const bool roles = !run.group_names.empty();
  JobConfig job{*run.schema, run.world_size, run.groups, run.group_names,
                roles,       EngineConfig{}, "",         run.group_pipeline_stages};
  job.engine.window_steps = window;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(job);
  if (!engine.ok()) {
    std::cerr << "stagefrontier " << command << ": " << engine.status().message() << "\n";
    return 2;
  }
  std::vector<Verdict> windows;
  std::vector<int64_t> profiled;
  for (const auto& [step, input] : run.steps) {
    // As the coordinator does: a step some rank profiled is slower for the profiler's sake.
    if (input.captured) {
      profiled.push_back(step);
      continue;
    }
    if (absl::Status s = (*engine)->AddStep(input); !s.ok()) {
      std::cerr << "stagefrontier " << command << ": " << label << ": " << s.message() << "\n";
      return 2;
    }
    for (Verdict& v : (*engine)->TakeClosedVerdicts()) windows.push_back(std::move(v));
  }
  RunInfo info{label,       run.job, run.world_size, static_cast<int64_t>(run.steps.size()),
               run.records, profiled};
  const JobReport report = (*engine)->Report();
  if (!as_json) {
    std::cout << RenderReportText(info, *run.schema, report, windows) << extra_text;
    return 0;
  }
  nlohmann::json out = nlohmann::json::parse(RenderReportJson(info, *run.schema, report, windows));
  if (extra_json.is_object()) out.update(extra_json);
  std::cout << out.dump(2) << "\n";
  return 0;
}

bool WriteRun(const std::string& path, const RecordedRun& run, const StageSchema& schema) {
  std::ofstream out(path);
  for (const auto& [step, input] : run.steps) {
    for (const RankStep& rs : input.ranks) {
      out << FormatRunRecord(run.job, run.world_size, schema, step, rs) << "\n";
    }
  }
  return static_cast<bool>(out);
}

namespace {

struct AnalyzeFlags {
  std::string path;
  bool as_json = false;
  int window = 100;
};

int Analyze(const AnalyzeFlags& f) {
  absl::StatusOr<RecordedRun> run = ReadRunFile(f.path);
  if (!run.ok()) {
    std::cerr << "stagefrontier analyze: " << run.status().message() << "\n";
    return 2;
  }
  return AnalyzeRun("analyze", f.path, *run, f.as_json, f.window);
}

}  // namespace

Subcommand AddAnalyzeCommand(CLI::App& app) {
  auto f = std::make_shared<AnalyzeFlags>();
  CLI::App* analyze =
      app.add_subcommand("analyze", "Account a recorded run (JSON Lines) and print the report");
  analyze
      ->add_option("run", f->path,
                   "Recorded run, one JSON record per rank-step (docs/run-format.md)")
      ->required();
  analyze->add_flag("--json", f->as_json, "Print the report as JSON");
  analyze->add_option("--window", f->window, "Steps per verdict window")
      ->check(CLI::Range(2, 100000));
  return {analyze, [f] { return Analyze(*f); }};
}

}  // namespace stagefrontier
