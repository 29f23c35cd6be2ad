// Test helper: runs a simulated job through the engine and returns its final report.
#ifndef STAGEFRONTIER_TESTS_DAEMON_ACCOUNTING_SCENARIO_RUNNER_H_
#define STAGEFRONTIER_TESTS_DAEMON_ACCOUNTING_SCENARIO_RUNNER_H_

#include <memory>
#include <string>
#include <vector>

#include "daemon/accounting/engine.h"
#include "daemon/sim/training_simulator.h"

namespace stagefrontier::testing {

struct ScenarioResult {
  JobReport report;                      // over the last window
  std::vector<Verdict> window_verdicts;  // every closed job-wide window
  std::vector<Verdict> group_verdicts;   // every closed per-group window
  StageSchema schema;
};

// Runs `config` through an engine (same groups), failing the test on any error.
ScenarioResult RunScenario(const SimConfig& config, const EngineConfig& engine = EngineConfig{});

// Shorthand: ParseFault that fails the test on error.
Fault MustFault(const std::string& text);

// Index of `name` in the schema.
int32_t StageIndex(const StageSchema& schema, const std::string& name);

}  // namespace stagefrontier::testing

#endif  // STAGEFRONTIER_TESTS_DAEMON_ACCOUNTING_SCENARIO_RUNNER_H_
