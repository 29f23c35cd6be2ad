// stagefrontier reduce-trace TRACE.json... [--schema S] [--json] [--out RUN.jsonl]: reduce
// torch.profiler traces to the stub's stages and account them with the same engine.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "daemon/analyze/analyze_commands.h"
#include "daemon/analyze/trace_run.h"

namespace stagefrontier {
namespace {

struct ReduceTraceFlags {
  std::vector<std::string> paths;
  std::string schema = kDefaultTraceSchema;
  bool as_json = false;
  std::string out_path;
};

int ReduceTrace(const ReduceTraceFlags& f) {
  absl::StatusOr<StageSchema> schema = StageSchema::Parse(f.schema);
  if (!schema.ok()) {
    std::cerr << "stagefrontier reduce-trace: --schema: " << schema.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<TraceReduction> r = ReduceTraceFiles(f.paths, *schema);
  if (!r.ok()) {
    std::cerr << "stagefrontier reduce-trace: " << r.status().message() << "\n";
    return 2;
  }
  if (!f.out_path.empty() && !WriteRun(f.out_path, r->run, *schema)) {
    std::cerr << "stagefrontier reduce-trace: cannot write " << f.out_path << "\n";
    return 2;
  }
  const double ratio = static_cast<double>(r->trace_bytes) /
                       static_cast<double>(std::max<uint64_t>(1, r->packed_bytes));
  std::ostringstream text;
  text << "\ntraces: " << f.paths.size() << " files, " << r->trace_bytes << " bytes, "
       << r->trace_events << " events for " << r->rank_steps << " rank-steps ("
       << r->run.steps.size() << " steps)\nStageFrontier's packed step vectors for the same "
       << "rank-steps: " << r->packed_bytes << " bytes (" << std::fixed << std::setprecision(0)
       << ratio << "x smaller)\n";
  for (const std::string& n : r->notes) text << "note: " << n << "\n";
  nlohmann::json extra = {{"trace_files", f.paths.size()},   {"trace_bytes", r->trace_bytes},
                          {"trace_events", r->trace_events}, {"rank_steps", r->rank_steps},
                          {"packed_bytes", r->packed_bytes}, {"notes", r->notes}};
  return AnalyzeRun("reduce-trace", absl::StrCat(f.paths.size(), " traces"), r->run, f.as_json,
                    static_cast<int>(std::max<size_t>(2, r->run.steps.size())), text.str(), extra);
}

}  // namespace

Subcommand AddReduceTraceCommand(CLI::App& app) {
  auto f = std::make_shared<ReduceTraceFlags>();
  CLI::App* reduce = app.add_subcommand(
      "reduce-trace",
      "Reduce torch.profiler Chrome traces (one per rank) to the stub's stages and account them "
      "with the same engine; compares their bytes with StageFrontier's");
  reduce->add_option("traces", f->paths, "Chrome trace JSON files, one per rank")->required();
  reduce
      ->add_option("--schema", f->schema,
                   "Stages to reduce to, as the trainer declared them (default: "
                   "stagefrontier.torch's without the comm hook)")
      ->capture_default_str();
  reduce->add_flag("--json", f->as_json, "Print as JSON");
  reduce->add_option("--out", f->out_path, "Also write the reduced steps as a run file");
  return {reduce, [f] { return ReduceTrace(*f); }};
}

}  // namespace stagefrontier
