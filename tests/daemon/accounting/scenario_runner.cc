#include "tests/daemon/accounting/scenario_runner.h"

#include <catch2/catch.hpp>

namespace stagefrontier::testing {

ScenarioResult RunScenario(const SimConfig& config, const EngineConfig& engine_config) {
  absl::StatusOr<TrainingSimulator> sim = TrainingSimulator::Create(config);
  REQUIRE(sim.ok());
  // A pipeline declares its layout as the coordinator does: group s is pipeline stage s,
  // named "pp<s>", and the groups are roles.
  std::vector<std::string> names;
  if (config.pipeline_stages > 0) {
    for (size_t g = 0; g < config.groups.size(); ++g) names.push_back("pp" + std::to_string(g));
  }
  JobConfig job{sim->schema(),
                config.world_size,
                config.groups,
                names,
                !names.empty(),
                engine_config,
                "",
                {}};
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(job);
  REQUIRE(engine.ok());
  ScenarioResult result{JobReport{}, {}, {}, sim->schema()};
  StepInput step;
  while (sim->Next(&step)) {
    absl::Status s = (*engine)->AddStep(step);
    INFO(s.ToString());
    REQUIRE(s.ok());
    for (Verdict& v : (*engine)->TakeClosedVerdicts()) {
      if (v.group == "job") {
        result.window_verdicts.push_back(std::move(v));
      } else {
        result.group_verdicts.push_back(std::move(v));
      }
    }
  }
  result.report = (*engine)->Report();
  return result;
}

Fault MustFault(const std::string& text) {
  absl::StatusOr<Fault> f = ParseFault(text);
  INFO(f.status().ToString());
  REQUIRE(f.ok());
  return *f;
}

int32_t StageIndex(const StageSchema& schema, const std::string& name) {
  std::optional<size_t> k = schema.Find(name);
  REQUIRE(k.has_value());
  return static_cast<int32_t>(*k);
}

}  // namespace stagefrontier::testing
