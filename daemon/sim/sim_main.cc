// `stagefrontier-sim`: simulates synchronized data-parallel training and writes the run as
// JSON Lines (docs/run-format.md), exactly what stubs would report, plus the ground truth.
//
//   stagefrontier-sim --ranks 16 --steps 300 --out run.jsonl --truth truth.json
//       --fault slow:data:rank=11:magnitude=30ms:start=100
// Exit codes: 0 written, 1 usage error, 2 invalid configuration or unwritable output.
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "daemon/analyze/run_file.h"
#include "daemon/sim/training_simulator.h"

namespace stagefrontier {
namespace {

struct SimFlags {
  int32_t ranks = 16;
  int64_t steps = 300;
  uint64_t seed = 1;
  std::string preset = "ddp";
  std::vector<std::string> faults;
  int32_t groups = 1;
  bool skew = false;
  bool probe = false;
  std::string job = "sim";
  std::string out_path;
  std::string truth_path;
};

void AddFlags(CLI::App& app, SimFlags* f) {
  app.add_option("--ranks", f->ranks, "World size")->check(CLI::Range(1, 1 << 20));
  app.add_option("--steps", f->steps, "Steps to simulate")
      ->check(CLI::Range(int64_t{1}, int64_t{10'000'000}));
  app.add_option("--seed", f->seed, "Random seed (runs are reproducible)");
  app.add_option("--schema", f->preset,
                 "ddp: data,forward,backward,grad_sync(sync),optimizer; mixed: backward overlaps "
                 "the all-reduce")
      ->check(CLI::IsMember({"ddp", "mixed"}));
  app.add_option("--fault", f->faults,
                 "slow:STAGE:rank=R[+R]:magnitude=40ms[:every=N|:ramp=N][:start=N][:end=N], "
                 "collective:STAGE:magnitude=5ms[...], exit:STAGE:rank=R[+R]:magnitude=2ms[...], "
                 "stop:rank=R[:start=N]; repeatable");
  app.add_option("--groups", f->groups, "Split the ranks into N contiguous sync groups")
      ->check(CLI::PositiveNumber);
  app.add_flag("--clock-skew", f->skew,
               "Give every rank a clock offset of up to 6 h and up to 100 ppm drift");
  app.add_flag("--probe", f->probe, "Report collective probe spans inside mixed stages");
  app.add_option("--job", f->job, "Job id written into every record");
  app.add_option("--out", f->out_path, "Output file (default: standard output)");
  app.add_option("--truth", f->truth_path, "Write the injected faults (ground truth) as JSON here");
}

absl::StatusOr<SimConfig> ConfigFrom(const SimFlags& f) {
  SimConfig config =
      f.preset == "mixed" ? SimConfig::MixedBackward(f.ranks) : SimConfig::DataParallel(f.ranks);
  config.steps = f.steps;
  config.seed = f.seed;
  config.clock_skew = f.skew;
  config.probe = f.probe;
  if (f.groups > f.ranks) {
    return absl::InvalidArgumentError(
        absl::StrCat("--groups ", f.groups, " is more than --ranks ", f.ranks));
  }
  if (f.groups > 1) config.groups = ContiguousGroups(f.ranks, f.groups);
  for (const std::string& text : f.faults) {
    absl::StatusOr<Fault> fault = ParseFault(text);
    if (!fault.ok()) return fault.status();
    config.faults.push_back(*fault);
  }
  return config;
}

// Every rank's record of every step, in the run format.
void WriteRun(TrainingSimulator& sim, const SimFlags& f, const SimConfig& config,
              std::ostream& out) {
  std::vector<int32_t> group_of(f.ranks, -1);
  if (f.groups > 1) {
    for (size_t g = 0; g < config.groups.size(); ++g) {
      for (int32_t r : config.groups[g]) group_of[r] = static_cast<int32_t>(g);
    }
  }
  StepInput step;
  while (sim.Next(&step)) {
    for (const RankStep& r : step.ranks) {
      out << FormatRunRecord(f.job, f.ranks, sim.schema(), step.step, r, group_of[r.rank]) << "\n";
    }
  }
  out.flush();
}

bool WriteTruth(const TrainingSimulator& sim, const SimFlags& f) {
  nlohmann::ordered_json truth;
  truth["job"] = f.job;
  truth["faults"] = f.faults;
  nlohmann::ordered_json cells = nlohmann::ordered_json::array();
  for (auto [stage, rank] : sim.FaultCells())
    cells.push_back({{"stage", sim.schema().stage(stage).name}, {"rank", rank}});
  truth["slow_cells"] = cells;
  std::ofstream t(f.truth_path);
  t << truth.dump(2) << "\n";
  return static_cast<bool>(t);
}

}  // namespace
}  // namespace stagefrontier

int main(int argc, char** argv) {
  using namespace stagefrontier;
  CLI::App app{"Simulate synchronized data-parallel training and write per-rank stage timestamps"};
  SimFlags f;
  AddFlags(app, &f);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }
  absl::StatusOr<SimConfig> config = ConfigFrom(f);
  if (!config.ok()) {
    std::cerr << "stagefrontier-sim: " << config.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<TrainingSimulator> sim = TrainingSimulator::Create(*config);
  if (!sim.ok()) {
    std::cerr << "stagefrontier-sim: " << sim.status().message() << "\n";
    return 2;
  }
  std::ofstream file;
  if (!f.out_path.empty()) {
    file.open(f.out_path);
    if (!file) {
      std::cerr << "stagefrontier-sim: cannot write " << f.out_path << "\n";
      return 2;
    }
  }
  std::ostream& out = f.out_path.empty() ? std::cout : file;
  WriteRun(*sim, f, *config, out);
  if (!out) {
    std::cerr << "stagefrontier-sim: write failed\n";
    return 2;
  }
  if (!f.truth_path.empty() && !WriteTruth(*sim, f)) {
    std::cerr << "stagefrontier-sim: cannot write " << f.truth_path << "\n";
    return 2;
  }
  return 0;
}
