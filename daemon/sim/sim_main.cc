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

#include "daemon/analyze/run_file.h"
#include "daemon/sim/training_simulator.h"

int main(int argc, char** argv) {
  using namespace stagefrontier;
  CLI::App app{"Simulate synchronized data-parallel training and write per-rank stage timestamps"};
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
  app.add_option("--ranks", ranks, "World size")->check(CLI::Range(1, 1 << 20));
  app.add_option("--steps", steps, "Steps to simulate")
      ->check(CLI::Range(int64_t{1}, int64_t{10'000'000}));
  app.add_option("--seed", seed, "Random seed (runs are reproducible)");
  app.add_option("--schema", preset,
                 "ddp: data,forward,backward,grad_sync(sync),optimizer; mixed: backward overlaps "
                 "the all-reduce")
      ->check(CLI::IsMember({"ddp", "mixed"}));
  app.add_option("--fault", faults,
                 "slow:STAGE:rank=R[+R]:magnitude=40ms[:every=N|:ramp=N][:start=N][:end=N], "
                 "collective:STAGE:magnitude=5ms[...], stop:rank=R[:start=N]; repeatable");
  app.add_option("--groups", groups, "Split the ranks into N contiguous sync groups")
      ->check(CLI::PositiveNumber);
  app.add_flag("--clock-skew", skew,
               "Give every rank a clock offset of up to 6 h and up to 100 ppm drift");
  app.add_flag("--probe", probe, "Report collective probe spans inside mixed stages");
  app.add_option("--job", job, "Job id written into every record");
  app.add_option("--out", out_path, "Output file (default: standard output)");
  app.add_option("--truth", truth_path, "Write the injected faults (ground truth) as JSON here");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }
  SimConfig config =
      preset == "mixed" ? SimConfig::MixedBackward(ranks) : SimConfig::DataParallel(ranks);
  config.steps = steps;
  config.seed = seed;
  config.clock_skew = skew;
  config.probe = probe;
  if (groups > ranks) {
    std::cerr << "stagefrontier-sim: --groups " << groups << " is more than --ranks " << ranks
              << "\n";
    return 2;
  }
  if (groups > 1) config.groups = ContiguousGroups(ranks, groups);
  for (const std::string& f : faults) {
    absl::StatusOr<Fault> fault = ParseFault(f);
    if (!fault.ok()) {
      std::cerr << "stagefrontier-sim: " << fault.status().message() << "\n";
      return 2;
    }
    config.faults.push_back(*fault);
  }
  absl::StatusOr<TrainingSimulator> sim = TrainingSimulator::Create(config);
  if (!sim.ok()) {
    std::cerr << "stagefrontier-sim: " << sim.status().message() << "\n";
    return 2;
  }
  std::ofstream file;
  if (!out_path.empty()) {
    file.open(out_path);
    if (!file) {
      std::cerr << "stagefrontier-sim: cannot write " << out_path << "\n";
      return 2;
    }
  }
  std::ostream& out = out_path.empty() ? std::cout : file;
  std::vector<int32_t> group_of(ranks, -1);
  if (groups > 1) {
    for (size_t g = 0; g < config.groups.size(); ++g) {
      for (int32_t r : config.groups[g]) group_of[r] = static_cast<int32_t>(g);
    }
  }
  StepInput step;
  while (sim->Next(&step)) {
    for (const RankStep& r : step.ranks) {
      out << FormatRunRecord(job, ranks, sim->schema(), step.step, r, group_of[r.rank]) << "\n";
    }
  }
  out.flush();
  if (!out) {
    std::cerr << "stagefrontier-sim: write failed\n";
    return 2;
  }
  if (!truth_path.empty()) {
    nlohmann::ordered_json truth;
    truth["job"] = job;
    truth["faults"] = faults;
    nlohmann::ordered_json cells = nlohmann::ordered_json::array();
    for (auto [stage, rank] : sim->FaultCells())
      cells.push_back({{"stage", sim->schema().stage(stage).name}, {"rank", rank}});
    truth["slow_cells"] = cells;
    std::ofstream t(truth_path);
    t << truth.dump(2) << "\n";
    if (!t) {
      std::cerr << "stagefrontier-sim: cannot write " << truth_path << "\n";
      return 2;
    }
  }
  return 0;
}
