// The `stagefrontier` command line.
//   stagefrontier analyze RUN.jsonl [--json] [--window N]   account a recorded run
//   stagefrontier segment SEGMENT [--json] [--drain RUN.jsonl] inspect / drain a node's segment
// Exit codes: 0 done, 1 usage error, 2 bad input (nothing printed to stdout), 3 internal error.
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>

#include "daemon/accounting/engine.h"
#include "daemon/analyze/report_render.h"
#include "daemon/analyze/run_file.h"
#include "daemon/analyze/segment_inspect.h"

namespace stagefrontier {
namespace {

int Analyze(const std::string& path, bool as_json, int window) {
  absl::StatusOr<RecordedRun> run = ReadRunFile(path);
  if (!run.ok()) {
    std::cerr << "stagefrontier analyze: " << run.status().message() << "\n";
    return 2;
  }
  JobConfig job{*run->schema, run->world_size, run->groups, EngineConfig{}, ""};
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

int Segment(const std::string& path, bool as_json, const std::string& drain_path) {
  std::ofstream drain;
  if (!drain_path.empty()) {
    drain.open(drain_path, std::ios::app);
    if (!drain) {
      std::cerr << "stagefrontier segment: cannot write " << drain_path << "\n";
      return 2;
    }
  }
  absl::StatusOr<SegmentSummary> s = InspectSegment(path, drain_path.empty() ? nullptr : &drain);
  if (!s.ok()) {
    std::cerr << "stagefrontier segment: " << s.status().message() << "\n";
    return 2;
  }
  std::cout << (as_json ? RenderSegmentJson(*s) : RenderSegmentText(*s));
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
  CLI::App* segment = app.add_subcommand(
      "segment", "Show a node's shared-memory segment; --drain copies its rings into a run file");
  std::string segment_path;
  std::string drain_path;
  bool segment_json = false;
  segment->add_option("segment", segment_path, "Segment file, e.g. /dev/shm/stagefrontier.JOB.seg")
      ->required();
  segment->add_flag("--json", segment_json, "Print as JSON");
  segment->add_option("--drain", drain_path,
                      "Consume every pending record and append it to this run file (refused "
                      "while a sidecar drains the segment)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }
  if (segment->parsed()) return stagefrontier::Segment(segment_path, segment_json, drain_path);
  return stagefrontier::Analyze(path, as_json, window);
}
