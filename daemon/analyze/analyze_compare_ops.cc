// stagefrontier compare-ops --stage S --suspect TRACE.json REFERENCE.json... [--json]: which
// operator of a stage makes a rank slow.
#include <iostream>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/analyze/analyze_commands.h"
#include "daemon/captures/capture_analysis.h"
#include "daemon/captures/operator_report_render.h"

namespace stagefrontier {
namespace {

struct CompareOpsFlags {
  std::string suspect;
  std::vector<std::string> references;
  std::string stage;
  std::string schema = kDefaultTraceSchema;
  size_t top = 5;
  bool as_json = false;
};

int CompareOps(const CompareOpsFlags& f) {
  absl::StatusOr<StageSchema> schema = StageSchema::Parse(f.schema);
  if (!schema.ok()) {
    std::cerr << "stagefrontier compare-ops: --schema: " << schema.status().message() << "\n";
    return 2;
  }
  CompareOptions options;
  options.top = f.top;
  absl::StatusOr<OperatorReport> r =
      AnalyzeCaptureFiles(f.suspect, f.references, *schema, f.stage, options);
  if (!r.ok()) {
    std::cerr << "stagefrontier compare-ops: " << r.status().message() << "\n";
    return 2;
  }
  if (f.as_json) {
    std::cout << OperatorReportJson(*r).dump(2) << "\n";
  } else {
    std::cout << RenderOperatorReportText(*r);
  }
  return 0;
}

}  // namespace

Subcommand AddCompareOpsCommand(CLI::App& app) {
  auto f = std::make_shared<CompareOpsFlags>();
  CLI::App* compare = app.add_subcommand(
      "compare-ops",
      "Which operator inside a stage makes the suspect rank slow: its profiler trace against "
      "reference ranks' traces of the same steps (culprit, victim, dependency gap)");
  compare->add_option("--suspect", f->suspect, "The suspect rank's Chrome trace")->required();
  compare->add_option("references", f->references, "Reference ranks' Chrome traces")->required();
  compare->add_option("--stage", f->stage, "The stage to look inside")->required();
  compare->add_option("--schema", f->schema, "Stages, as the trainer declared them")
      ->capture_default_str();
  compare->add_option("--top", f->top, "Findings to print")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  compare->add_flag("--json", f->as_json, "Print as JSON");
  return {compare, [f] { return CompareOps(*f); }};
}

}  // namespace stagefrontier
