// The scenario table (docs/accounting.md, "Scenarios the engine must get right"), run through
// the simulator and the engine, with ground truth.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <set>

#include "tests/daemon/accounting/scenario_runner.h"

namespace stagefrontier::testing {
namespace {

SimConfig Ddp(int32_t world = 16, uint64_t seed = 1) {
  SimConfig c = SimConfig::DataParallel(world);
  c.steps = 300;
  c.seed = seed;
  return c;
}

// Every closed window of a persistent fault, and the final sliding one, carry the label.
void RequireAllWindows(const ScenarioResult& r, const std::string& label) {
  REQUIRE_FALSE(r.window_verdicts.empty());
  for (const Verdict& v : r.window_verdicts) {
    INFO("window " << v.first_step << ".." << v.last_step << ": " << v.explanation);
    CHECK(LabelText(v) == label);
  }
  INFO(r.report.job.verdict.explanation);
  CHECK(LabelText(r.report.job.verdict) == label);
}

void RequireTop(const ScenarioResult& r, const std::string& stage, int32_t rank) {
  const Verdict& v = r.report.job.verdict;
  REQUIRE_FALSE(v.suspects.empty());
  CHECK(r.schema.stage(v.suspects[0].stage).name == stage);
  CHECK(v.suspects[0].rank == rank);
  CHECK(v.candidate_ranks == std::vector<int32_t>{rank});
}

// Runs one fault on the default 16-rank job and expects CLEAR on (stage, rank) in every window.
ScenarioResult ExpectClear(const std::string& fault, const std::string& stage, int32_t rank) {
  SimConfig c = Ddp();
  c.faults.push_back(MustFault(fault));
  ScenarioResult r = RunScenario(c);
  RequireAllWindows(r, "CLEAR");
  RequireTop(r, stage, rank);
  return r;
}

TEST_CASE("row 1: data stall on one rank, every step -> CLEAR (data, rank)", "[scenario]") {
  ScenarioResult r = ExpectClear("slow:data:rank=5:magnitude=30ms", "data", 5);
  const Verdict& v = r.report.job.verdict;
  CHECK(v.suspects[0].share > 0.9);
  CHECK(v.wait_agreement == 1.0);  // it is the last to arrive at grad_sync
  // Behaving like its peers would save about the stall.
  CHECK(v.suspects[0].what_if_saving_ns > 25'000'000);
  CHECK(v.suspects[0].what_if_saving_ns < 32'000'000);
  // The delay first appears in data, and a wait never raises a later increment.
  CHECK(r.report.job.stages[0].first_excess_steps == v.steps);
  CHECK(r.report.job.stages[3].mean_excess_ns == 0);
}

TEST_CASE("excess cells: every charged (stage, rank), largest first, the suspects first",
          "[scenario]") {
  SimConfig c = Ddp();
  c.faults.push_back(MustFault("slow:data:rank=5:magnitude=30ms"));
  const ScenarioResult r = RunScenario(c);
  const Verdict& v = r.report.job.verdict;
  REQUIRE(v.excess_cells.size() >= v.suspects.size());
  REQUIRE(v.excess_cells.size() <= kMaxExcessCells);
  double sum = 0;
  for (size_t i = 0; i < v.excess_cells.size(); ++i) {
    const ExcessCell& e = v.excess_cells[i];
    CHECK(e.excess_ns > 0);
    CHECK(e.flagged_steps > 0);
    if (i > 0) CHECK(v.excess_cells[i - 1].excess_ns >= e.excess_ns);
    if (i < v.suspects.size()) {
      CHECK(e.stage == v.suspects[i].stage);
      CHECK(e.rank == v.suspects[i].rank);
      CHECK(e.excess_ns == v.suspects[i].excess_ns);
    }
    sum += static_cast<double>(e.excess_ns);
  }
  // The cells hold the window's whole attributed excess (truncated to ns per cell).
  CHECK(sum <= static_cast<double>(v.total_excess_ns) + 1);
  CHECK(sum >= static_cast<double>(v.total_excess_ns) - static_cast<double>(v.excess_cells.size()));
  const auto has = [&](const std::string& stage, int32_t rank) {
    return std::any_of(v.excess_cells.begin(), v.excess_cells.end(), [&](const ExcessCell& e) {
      return r.schema.stage(e.stage).name == stage && e.rank == rank;
    });
  };
  CHECK(has("data", 5));
}

TEST_CASE("excess cells: a group-wide tie has a cell for every rank, beyond the 5 suspects",
          "[scenario]") {
  SimConfig c = Ddp();
  c.faults.push_back(MustFault("collective:grad_sync:magnitude=10ms:start=60"));
  const ScenarioResult r = RunScenario(c);
  const Verdict& v = r.report.job.verdict;
  REQUIRE(v.suspects.size() == 5);
  std::set<int32_t> ranks;
  for (const ExcessCell& e : v.excess_cells) {
    if (r.schema.stage(e.stage).name == "grad_sync") ranks.insert(e.rank);
  }
  CHECK(ranks.size() == 16);
}

TEST_CASE("row 2: slow forward on one rank -> CLEAR (forward, rank)", "[scenario]") {
  ExpectClear("slow:forward:rank=7:magnitude=10ms", "forward", 7);
}

TEST_CASE("row 3: slow backward, separate sync stage -> CLEAR (backward, rank)", "[scenario]") {
  ExpectClear("slow:backward:rank=9:magnitude=10ms", "backward", 9);
}

TEST_CASE("row 4: slow backward in a mixed stage -> MIXED_SYNC; with the probe CLEAR",
          "[scenario]") {
  SimConfig c = SimConfig::MixedBackward(16);
  c.steps = 300;
  // Work and waiting in a mixed stage end together for every rank, so only a change over
  // time is visible: the fault starts after the baselines have warmed up.
  c.faults.push_back(MustFault("slow:backward:rank=9:magnitude=10ms:start=60"));
  ScenarioResult without = RunScenario(c);
  const Verdict& v = without.report.job.verdict;
  CHECK(LabelText(v) == "AMBIGUOUS MIXED_SYNC");
  CHECK(std::find(v.candidate_ranks.begin(), v.candidate_ranks.end(), 9) !=
        v.candidate_ranks.end());
  CHECK_THAT(v.settle, Catch::Contains("enable the collective probe for stage \"backward\""));
  CHECK_FALSE(v.steps_to_profile.empty());

  c.probe = true;
  ScenarioResult with = RunScenario(c);
  CHECK(LabelText(with.report.job.verdict) == "CLEAR");
  RequireTop(with, "backward", 9);
}

TEST_CASE("row 5: slow optimizer on one rank -> CLEAR (optimizer, rank)", "[scenario]") {
  ScenarioResult r = ExpectClear("slow:optimizer:rank=3:magnitude=10ms", "optimizer", 3);
  // The tail delay surfaces as a late start at the next step's grad_sync and is traced back
  // to the optimizer: nothing stays charged to grad_sync.
  CHECK(r.report.job.stages[4].mean_excess_ns > 5e6);
  CHECK(r.report.job.stages[3].mean_excess_ns == 0);
}

TEST_CASE("row 6: collective slow for the whole group -> excess in sync, TIE", "[scenario]") {
  SimConfig c = Ddp();
  c.faults.push_back(MustFault("collective:grad_sync:magnitude=10ms:start=60"));
  ScenarioResult r = RunScenario(c);
  const Verdict& v = r.report.job.verdict;
  INFO(v.explanation);
  CHECK(LabelText(v) == "AMBIGUOUS TIE");
  CHECK(v.group_wide);
  CHECK(v.candidate_stages == std::vector<int32_t>{3});
  CHECK(v.candidate_ranks.size() == 16);
  CHECK(r.report.job.frontier_top_stage == 3);
  CHECK_THAT(v.settle, Catch::Contains("whole group"));
}

TEST_CASE("row 6: a group shift within the steps' own jitter is not an event", "[scenario]") {
  // The simulated slow collective moves the median step by about 14 robust standard
  // deviations of the window's steps; on 2 shared cores real drift moved it by at most 1
  // (tests/eval/recorded). Asking for more than the simulator's 14 turns it HEALTHY, saying why.
  SimConfig c = Ddp();
  c.faults.push_back(MustFault("collective:grad_sync:magnitude=10ms:start=60"));
  EngineConfig strict;
  strict.group_spread_z = 30;
  const Verdict v = RunScenario(c, strict).report.job.verdict;
  INFO(v.explanation);
  CHECK(LabelText(v) == "HEALTHY");
  CHECK_FALSE(v.group_wide);
  CHECK_THAT(v.explanation, Catch::Contains("within that jitter"));
}

TEST_CASE("row 6 at 2048 ranks: every rank is charged and named", "[scenario]") {
  // The whole-group path charges every rank every step; at this size the bookkeeping must
  // stay linear (engine_benchmark's GroupWide case measures it).
  SimConfig c = Ddp(2048);
  c.steps = 120;
  c.faults.push_back(MustFault("collective:grad_sync:magnitude=10ms:start=40"));
  ScenarioResult r = RunScenario(c);
  const Verdict& v = r.report.job.verdict;
  CHECK(LabelText(v) == "AMBIGUOUS TIE");
  CHECK(v.candidate_ranks.size() == 2048);
  CHECK(r.report.job.frontier_top_stage == 3);
}

TEST_CASE("row 7: intermittent stall, 1 step in 10 -> CLEAR over the window", "[scenario]") {
  ScenarioResult r = ExpectClear("slow:data:rank=11:magnitude=30ms:every=10", "data", 11);
  CHECK(r.report.job.verdict.suspects[0].flagged_steps == 10);
}

TEST_CASE("row 7, small: a recurring stall under the material floor on average is found",
          "[scenario]") {
  // 12 ms 1 step in 7 moves the mean by 1.7 ms, under 2% of the 120 ms step; each
  // recurrence is 10% of it, and the steps it hits stand out.
  ScenarioResult r = ExpectClear("slow:optimizer:rank=9:magnitude=12ms:every=7", "optimizer", 9);
  const Verdict& v = r.report.job.verdict;
  CHECK(static_cast<double>(v.rank_shift_ns) <
        EngineConfig{}.rank_material_fraction * static_cast<double>(v.exposed_ns) / v.steps);
}

TEST_CASE("row 7, carried: a named recurring fault stays named when a spike elsewhere hides it",
          "[scenario]") {
  // Regression (live row 5, 64 ranks): the first window names the recurring stall; in the
  // next, one 400 ms stall of another rank in the same stage inflates the pooled spread behind
  // every rank's mean-shift z, and the window alone read HEALTHY though the recurrences stood
  // out as much as before.
  SimConfig c = Ddp();
  c.steps = 200;
  c.faults.push_back(MustFault("slow:optimizer:rank=9:magnitude=12ms:every=7"));
  c.faults.push_back(MustFault("slow:optimizer:rank=3:magnitude=400ms:start=150:end=151"));
  const ScenarioResult carried = RunScenario(c);
  REQUIRE(carried.window_verdicts.size() == 2);
  for (const Verdict& v : carried.window_verdicts) {
    INFO("window " << v.first_step << ".." << v.last_step << ": " << v.explanation);
    CHECK(LabelText(v) == "CLEAR");
    REQUIRE_FALSE(v.suspects.empty());
    CHECK(v.suspects[0].rank == 9);
  }
  CHECK_THAT(carried.window_verdicts[1].explanation,
             Catch::Contains("named in the window ending at step 99"));
  EngineConfig alone;
  alone.carry_clear = false;
  const ScenarioResult each = RunScenario(c, alone);
  INFO(each.window_verdicts[1].explanation);
  CHECK(LabelText(each.window_verdicts[0]) == "CLEAR");
  CHECK(LabelText(each.window_verdicts[1]) != "CLEAR");
}

TEST_CASE("row 7, confirmed: recurrences short of a strong mean shift need the window before",
          "[scenario]") {
  // Two ranks, 6 ms (5% of the step, SPEC's smallest fault) 1 step in 12 from step 100: the
  // recurrences stand out and are material (kRecurrenceMaterial: 3 ms no longer is), the mean
  // shift stays short of rank_z_strong. A descheduled healthy rank looks like this in one
  // window; a fault stays. Named from the window after the one it began in (confirm_recurring).
  SimConfig c = Ddp(2);
  c.steps = 300;
  c.faults.push_back(MustFault("slow:optimizer:rank=1:magnitude=6ms:every=12:start=100"));
  const ScenarioResult r = RunScenario(c);
  REQUIRE(r.window_verdicts.size() == 3);
  for (const Verdict& v : r.window_verdicts) {
    INFO("window " << v.first_step << ".." << v.last_step << ": z " << v.rank_z << ", "
                    << v.explanation);
    CHECK(v.rank_z < EngineConfig{}.rank_z_strong);
  }
  CHECK(LabelText(r.window_verdicts[0]) == "HEALTHY");
  INFO(r.window_verdicts[1].explanation);
  CHECK(LabelText(r.window_verdicts[1]) != "CLEAR");
  INFO(r.window_verdicts[2].explanation);
  CHECK(LabelText(r.window_verdicts[2]) == "CLEAR");
  REQUIRE_FALSE(r.window_verdicts[2].suspects.empty());
  CHECK(r.window_verdicts[2].suspects[0].rank == 1);
  // Without the rule the window it began in names it already.
  EngineConfig alone;
  alone.confirm_recurring = false;
  const ScenarioResult each = RunScenario(c, alone);
  CHECK(LabelText(each.window_verdicts[1]) == "CLEAR");
}

TEST_CASE("row 7, carried: nothing carries into a window without the named rank's evidence",
          "[scenario]") {
  // The stall stops with the first window: the next one is HEALTHY, not carried.
  SimConfig c = Ddp();
  c.steps = 200;
  c.faults.push_back(MustFault("slow:data:rank=11:magnitude=30ms:end=100"));
  const ScenarioResult r = RunScenario(c);
  REQUIRE(r.window_verdicts.size() == 2);
  CHECK(LabelText(r.window_verdicts[0]) == "CLEAR");
  INFO(r.window_verdicts[1].explanation);
  CHECK(LabelText(r.window_verdicts[1]) == "HEALTHY");
}

TEST_CASE("row 11, spikes: three isolated stalls on one rank are not a slow rank", "[scenario]") {
  // A descheduled process: three 100 ms stalls in the last window move that rank's mean by
  // 3 ms, above the 2% floor, and nothing else is different about it.
  SimConfig c = Ddp();
  c.faults.push_back(MustFault("slow:forward:rank=5:magnitude=100ms:start=250:end=253"));
  const Verdict v = RunScenario(c).report.job.verdict;
  INFO(v.explanation);
  CHECK(v.label != VerdictLabel::kClear);
  CHECK(v.candidate_ranks != std::vector<int32_t>{5});
}

TEST_CASE("row 8: two faults, different ranks and stages -> both top suspects, SPLIT",
          "[scenario]") {
  SimConfig c = Ddp();
  // Two faults in the same interval between waits mask each other (the group waits for the
  // later one only), so these strike on different steps.
  c.faults.push_back(MustFault("slow:data:rank=2:magnitude=30ms:every=4"));
  c.faults.push_back(MustFault("slow:optimizer:rank=12:magnitude=20ms:every=4:start=2"));
  ScenarioResult r = RunScenario(c);
  RequireAllWindows(r, "AMBIGUOUS SPLIT");
  const Verdict& v = r.report.job.verdict;
  REQUIRE(v.suspects.size() >= 2);
  std::set<std::pair<std::string, int32_t>> top2 = {
      {r.schema.stage(v.suspects[0].stage).name, v.suspects[0].rank},
      {r.schema.stage(v.suspects[1].stage).name, v.suspects[1].rank}};
  const std::set<std::pair<std::string, int32_t>> want = {{"data", 2}, {"optimizer", 12}};
  CHECK(top2 == want);
}

TEST_CASE("row 8b: overlapping faults: the binding one is named, the what-if is honest",
          "[scenario]") {
  SimConfig c = Ddp();
  c.faults.push_back(MustFault("slow:data:rank=2:magnitude=30ms"));
  c.faults.push_back(MustFault("slow:optimizer:rank=12:magnitude=20ms"));
  ScenarioResult r = RunScenario(c);
  RequireTop(r, "data", 2);
  // Fixing rank 2 alone saves only its lead over rank 12 (about 10 ms), not 30 ms.
  const int64_t saving = r.report.job.verdict.suspects[0].what_if_saving_ns;
  CHECK(saving > 7'000'000);
  CHECK(saving < 13'000'000);
}

TEST_CASE("row 9: two ranks slow in the same stage -> TIE naming both", "[scenario]") {
  SimConfig c = Ddp();
  c.faults.push_back(MustFault("slow:forward:rank=4+13:magnitude=20ms"));
  ScenarioResult r = RunScenario(c);
  RequireAllWindows(r, "AMBIGUOUS TIE");
  std::vector<int32_t> ranks = r.report.job.verdict.candidate_ranks;
  std::sort(ranks.begin(), ranks.end());
  CHECK(ranks == std::vector<int32_t>{4, 13});
}

TEST_CASE("row 9 with the probe: one last arriver settles the tie; a true tie stays a tie",
          "[scenario]") {
  // Rank 13 is slower than rank 4 by less than the tie tolerance: the stage marks cannot tell
  // them apart, but it arrives last at grad_sync's all-reduce every step.
  SimConfig c = Ddp();
  c.faults.push_back(MustFault("slow:forward:rank=4:magnitude=20ms"));
  c.faults.push_back(MustFault("slow:forward:rank=13:magnitude=21ms"));
  ScenarioResult without = RunScenario(c);
  INFO(without.report.job.verdict.explanation);
  CHECK(LabelText(without.report.job.verdict) == "AMBIGUOUS TIE");
  c.probe = true;
  ScenarioResult with = RunScenario(c);
  const Verdict& v = with.report.job.verdict;
  INFO(v.explanation);
  CHECK(LabelText(v) == "CLEAR");
  CHECK(v.candidate_ranks == std::vector<int32_t>{13});
  CHECK_THAT(v.explanation, Catch::Contains("the collective probe shows rank 13 arriving last"));
  REQUIRE_FALSE(v.suspects.empty());
  CHECK(v.suspects[0].rank == 13);  // the probe's rank leads the suspects

  // Equally slow: each is the last arriver about half the time; the probe does not decide.
  SimConfig same = Ddp();
  same.faults.push_back(MustFault("slow:forward:rank=4+13:magnitude=20ms"));
  same.probe = true;
  ScenarioResult tie = RunScenario(same);
  INFO(tie.report.job.verdict.explanation);
  CHECK(LabelText(tie.report.job.verdict) == "AMBIGUOUS TIE");
}

TEST_CASE("row 10: clock offsets of hours and 100 ppm drift give identical verdicts",
          "[scenario]") {
  std::vector<std::string> faults = {
      "slow:data:rank=5:magnitude=30ms",       "slow:forward:rank=7:magnitude=10ms",
      "slow:optimizer:rank=3:magnitude=10ms",  "slow:data:rank=11:magnitude=30ms:every=10",
      "slow:forward:rank=4+13:magnitude=20ms", "collective:grad_sync:magnitude=10ms:start=60",
  };
  for (const std::string& f : faults) {
    SimConfig c = Ddp();
    c.faults.push_back(MustFault(f));
    ScenarioResult plain = RunScenario(c);
    c.clock_skew = true;
    ScenarioResult skewed = RunScenario(c);
    INFO(f);
    const Verdict& a = plain.report.job.verdict;
    const Verdict& b = skewed.report.job.verdict;
    CHECK(LabelText(a) == LabelText(b));
    CHECK(a.candidate_ranks == b.candidate_ranks);
    CHECK(a.candidate_stages == b.candidate_stages);
    REQUIRE(a.suspects.size() == b.suspects.size());
    for (size_t i = 0; i < a.suspects.size(); ++i) {
      CHECK(a.suspects[i].stage == b.suspects[i].stage);
      CHECK(a.suspects[i].rank == b.suspects[i].rank);
    }
    REQUIRE(plain.window_verdicts.size() == skewed.window_verdicts.size());
    for (size_t i = 0; i < plain.window_verdicts.size(); ++i) {
      CHECK(LabelText(plain.window_verdicts[i]) == LabelText(skewed.window_verdicts[i]));
    }
  }
}

TEST_CASE("row 11: healthy noisy runs are HEALTHY in at least 99% of windows", "[scenario]") {
  int windows = 0;
  int healthy = 0;
  for (int32_t world : {4, 16, 64, 128}) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      SimConfig c = Ddp(world, seed * 7919);
      c.steps = 1000;
      c.clock_skew = seed % 2 == 0;
      c.stages[0].noise_cv = 0.08;  // a noisy data loader
      for (size_t k = 1; k < c.stages.size(); ++k) c.stages[k].noise_cv = 0.03;
      ScenarioResult r = RunScenario(c);
      for (const Verdict& v : r.window_verdicts) {
        ++windows;
        healthy += v.label == VerdictLabel::kHealthy;
        if (v.label != VerdictLabel::kHealthy) WARN("world " << world << ": " << v.explanation);
      }
    }
  }
  std::printf("healthy noisy runs: %d of %d windows HEALTHY\n", healthy, windows);
  REQUIRE(windows == 200);
  CHECK(healthy >= 198);
}

TEST_CASE("row 12: a rank stops reporting -> missing, accounting continues", "[scenario]") {
  SimConfig c = Ddp();
  c.faults.push_back(MustFault("stop:rank=6:start=100"));
  c.faults.push_back(MustFault("slow:data:rank=2:magnitude=30ms:start=150"));
  ScenarioResult r = RunScenario(c);
  const Verdict& v = r.report.job.verdict;
  CHECK(v.missing_ranks == std::vector<int32_t>{6});
  CHECK(v.partial_steps == v.steps);
  CHECK(LabelText(v) == "CLEAR");
  RequireTop(r, "data", 2);
}

TEST_CASE("row 13: several sync groups -> the suspect found inside its group", "[scenario]") {
  SimConfig c = Ddp();
  c.groups = ContiguousGroups(16, 4);
  c.faults.push_back(MustFault("slow:data:rank=9:magnitude=30ms"));
  ScenarioResult r = RunScenario(c);
  REQUIRE(r.report.groups.size() == 4);
  for (const GroupReport& g : r.report.groups) {
    INFO(g.group << ": " << g.verdict.explanation);
    if (g.group == "group2") {
      CHECK(LabelText(g.verdict) == "CLEAR");
      CHECK(g.verdict.candidate_ranks == std::vector<int32_t>{9});
    } else {
      CHECK(LabelText(g.verdict) == "HEALTHY");
    }
  }
  CHECK(LabelText(r.report.job.verdict) == "CLEAR");
  RequireTop(r, "data", 9);
}

TEST_CASE("the cheap dashboards misread a data stall that the frontier gets right", "[scenario]") {
  SimConfig c = Ddp(16);
  c.faults.push_back(MustFault("slow:data:rank=11:magnitude=30ms:start=100"));
  ScenarioResult r = RunScenario(c);
  const GroupReport& g = r.report.job;
  // The mean over ranks buries rank 11's stall and shows the others' wait in grad_sync.
  REQUIRE(g.mean_top_stage >= 0);
  const std::string mean_top = r.schema.stage(g.mean_top_stage).name;
  CHECK((mean_top == "grad_sync" || mean_top == "backward"));
  // The max over ranks counts the delay twice: its stages add up to more than the step.
  CHECK(g.mean_sum_of_max_ns > g.mean_exposed_ns + 20e6);
  // The frontier puts the excess on (data, 11).
  CHECK(g.frontier_top_stage == 0);
  RequireTop(r, "data", 11);
}

TEST_CASE("corroborating statistics point at the same rank", "[scenario]") {
  SimConfig c = Ddp(16);
  c.faults.push_back(MustFault("slow:forward:rank=6:magnitude=10ms"));
  ScenarioResult r = RunScenario(c);
  const GroupReport& g = r.report.job;
  REQUIRE_FALSE(g.divergence.empty());
  CHECK(g.divergence[0].rank == 6);
  CHECK(g.divergence[0].stage == 1);
  CHECK(g.divergence[0].ks > 0.9);
  REQUIRE_FALSE(g.outliers.empty());
  CHECK(g.outliers[0].rank == 6);
  CHECK(g.outliers[0].stage == 1);
  CHECK(g.outliers[0].fraction > 0.9);
}

TEST_CASE("a concurrent late arriver makes the lead CONCURRENT", "[scenario]") {
  SimConfig c = Ddp(16);
  // Rank 3's data stall leads the frontier, while rank 10 starts each step about as late
  // (a slow optimizer) and reaches grad_sync together with it.
  c.faults.push_back(MustFault("slow:data:rank=3:magnitude=30ms"));
  c.faults.push_back(MustFault("slow:optimizer:rank=10:magnitude=30ms"));
  ScenarioResult r = RunScenario(c);
  const Verdict& v = r.report.job.verdict;
  CHECK(LabelText(v) == "AMBIGUOUS CONCURRENT");
  CHECK(v.candidate_ranks == std::vector<int32_t>{3});
  CHECK(std::find(v.concurrent_ranks.begin(), v.concurrent_ranks.end(), 10) !=
        v.concurrent_ranks.end());
}

// Pipeline x data parallel (SimConfig::Pipeline): the runner declares the layout as the
// coordinator does (groups "pp0".., groups_are_roles), so the job's verdict is its groups'.
void PrintPipelineVerdict(const char* name, const ScenarioResult& r) {
  const Verdict& v = r.report.job.verdict;
  std::printf("%s: %s sync_group=\"%s\" suspects:", name, LabelText(v).c_str(),
              v.sync_group.c_str());
  for (const Suspect& s : v.suspects) {
    std::printf(" (%s, %d, %.1f ms, share %.2f)", r.schema.stage(s.stage).name.c_str(), s.rank,
                static_cast<double>(s.excess_ns) / 1e6, s.share);
  }
  std::printf("\n  %s\n", v.explanation.c_str());
  if (v.explanation.find(v.structural) == std::string::npos) {
    std::printf("  structural: %s\n", v.structural.c_str());
  }
}

// The closed windows that read HEALTHY; the others are said (WARN).
int HealthyWindows(const ScenarioResult& r) {
  int healthy = 0;
  for (const Verdict& v : r.window_verdicts) {
    healthy += v.label == VerdictLabel::kHealthy;
    if (v.label != VerdictLabel::kHealthy) WARN(LabelText(v) << ": " << v.explanation);
  }
  return healthy;
}

SimConfig Pp(int32_t stages, int32_t replicas, uint64_t seed = 1) {
  SimConfig c = SimConfig::Pipeline(stages, replicas);
  c.steps = 300;
  c.seed = seed;
  return c;
}

TEST_CASE("pipeline: a healthy 3 x 2 pipeline with a heavier last stage is HEALTHY",
          "[scenario][pipeline]") {
  SimConfig c = Pp(3, 2);
  c.steps = 1000;  // 10 windows
  c.stage_work_scale = {1.0, 1.0, 1.4};
  ScenarioResult r = RunScenario(c);
  const int healthy = HealthyWindows(r);
  const int windows = static_cast<int>(r.window_verdicts.size());
  std::printf("pipeline 3x2 healthy, last stage x1.4: %d of %d windows HEALTHY\n", healthy,
              windows);
  PrintPipelineVerdict("pipeline 3x2 healthy", r);
  REQUIRE(windows > 0);
  CHECK(healthy >= windows - 1);
  // Said as structural: the last pipeline stage, never a rank.
  CHECK_THAT(r.report.job.verdict.structural, Catch::StartsWith("Structural: sync group pp2 "));
  CHECK(r.report.job.verdict.suspects.empty());
  // A balanced pipeline is not.
  ScenarioResult balanced = RunScenario(Pp(3, 2));
  CHECK(balanced.report.job.verdict.structural.empty());
}

TEST_CASE("pipeline: the faulty cell's what-if saving is its effect on the step",
          "[scenario][pipeline]") {
  // Against the same run without the fault: the exposed step grows by what removing the
  // fault would save.
  SimConfig c = Pp(2, 2, /*seed=*/7);
  ScenarioResult healthy = RunScenario(c);
  c.faults.push_back(MustFault("slow:fwd:rank=3:magnitude=5ms:start=100"));
  ScenarioResult faulty = RunScenario(c);
  const Verdict& v = faulty.report.job.verdict;
  REQUIRE_FALSE(v.suspects.empty());
  REQUIRE(v.suspects[0].rank == 3);
  const double grown = faulty.report.job.mean_exposed_ns - healthy.report.job.mean_exposed_ns;
  const double saving = static_cast<double>(v.suspects[0].what_if_saving_ns);
  std::printf("pipeline 2x2 what-if: saving %.2f ms, exposed step grew %.2f ms\n", saving / 1e6,
              grown / 1e6);
  CHECK(saving == Approx(grown).epsilon(0.2));
}

TEST_CASE("pipeline: slow fwd on a last-stage rank -> CLEAR (fwd, rank) in pp1",
          "[scenario][pipeline]") {
  SimConfig c = Pp(2, 2);
  c.faults.push_back(MustFault("slow:fwd:rank=3:magnitude=5ms"));
  ScenarioResult r = RunScenario(c);
  PrintPipelineVerdict("pipeline 2x2 slow fwd rank 3", r);
  const Verdict& v = r.report.job.verdict;
  CHECK(LabelText(v) == "CLEAR");
  CHECK(v.sync_group == "pp1");
  RequireTop(r, "fwd", 3);
}

TEST_CASE("pipeline: slow bwd on a first-stage rank -> CLEAR (bwd, rank) in pp0",
          "[scenario][pipeline]") {
  SimConfig c = Pp(3, 2);
  c.faults.push_back(MustFault("slow:bwd:rank=0:magnitude=6ms"));
  ScenarioResult r = RunScenario(c);
  PrintPipelineVerdict("pipeline 3x2 slow bwd rank 0", r);
  const Verdict& v = r.report.job.verdict;
  CHECK(LabelText(v) == "CLEAR");
  CHECK(v.sync_group == "pp0");
  RequireTop(r, "bwd", 0);
}

TEST_CASE("pipeline: an intermittent data stall -> (data, rank) in its stage's group",
          "[scenario][pipeline]") {
  SimConfig c = Pp(2, 3);
  c.faults.push_back(MustFault("slow:data:rank=4:magnitude=10ms:every=4"));
  ScenarioResult r = RunScenario(c);
  PrintPipelineVerdict("pipeline 2x3 intermittent data rank 4", r);
  const Verdict& v = r.report.job.verdict;
  CHECK(LabelText(v) == "CLEAR");
  CHECK(v.sync_group == "pp1");
  RequireTop(r, "data", 4);
}

// A collective over the whole job beside the groups' own (a loss all-reduce over every rank
// after the optimizer, declared `sync` like dp_sync): within each role group its members
// arrive and leave together as in a group collective, so no scope of its own is needed. A
// group that waits there for another pipeline stage waits as a whole (no rank of it is
// charged) and the job's verdict still names the group that holds the fault.
SimConfig PpLossSync(int32_t stages, int32_t replicas) {
  SimConfig c = Pp(stages, replicas);
  SimStage loss{"loss_sync", StageKind::kSync, 500'000, 0.02, 0};
  loss.job_scope = true;
  c.stages.push_back(loss);
  return c;
}

TEST_CASE("pipeline: a job-wide collective marked sync leaves the verdicts as they were",
          "[scenario][pipeline]") {
  for (const bool unbalanced : {false, true}) {
    SimConfig c = PpLossSync(3, 2);
    c.steps = 1000;  // 10 windows
    if (unbalanced) c.stage_work_scale = {1.0, 1.0, 1.4};
    {
      // The collective is the job's: the last pipeline stage ends its backward pass first and
      // waits in it for the first stage (the rest of the backward pass, ~30 ms a step), which
      // a per-group collective would not make it do.
      absl::StatusOr<TrainingSimulator> sim = TrainingSimulator::Create(c);
      REQUIRE(sim.ok());
      const int k = StageIndex(sim->schema(), "loss_sync");
      double first = 0, last = 0;
      StepInput in;
      for (int i = 0; i < 50 && sim->Next(&in); ++i) {
        for (const RankStep& rs : in.ranks) {
          const double d = static_cast<double>(rs.boundaries_ns[k + 1] - rs.boundaries_ns[k]);
          if (rs.rank < 2) first += d;  // pp0
          if (rs.rank >= 4) last += d;  // pp2
        }
      }
      CHECK(last / 100 > first / 100 + 20e6);  // per rank-step
    }
    ScenarioResult r = RunScenario(c);
    const int healthy = HealthyWindows(r);
    const int windows = static_cast<int>(r.window_verdicts.size());
    std::printf("pipeline 3x2 + loss_sync over the job, %s: %d of %d windows HEALTHY\n",
                unbalanced ? "last stage x1.4" : "balanced", healthy, windows);
    REQUIRE(windows > 0);
    CHECK(healthy >= windows - 1);
    CHECK(r.report.job.verdict.suspects.empty());
    CHECK(r.report.job.verdict.structural.empty() == !unbalanced);
  }
  const struct {
    const char* fault;
    const char* stage;
    int32_t rank;
    const char* group;
  } cases[] = {{"slow:fwd:rank=3:magnitude=5ms", "fwd", 3, "pp1"},
               {"slow:bwd:rank=0:magnitude=6ms", "bwd", 0, "pp0"},
               {"slow:data:rank=4:magnitude=10ms:every=4", "data", 4, "pp2"},
               {"slow:optimizer:rank=5:magnitude=4ms", "optimizer", 5, "pp2"}};
  for (const auto& k : cases) {
    SimConfig c = PpLossSync(3, 2);
    c.faults.push_back(MustFault(k.fault));
    ScenarioResult r = RunScenario(c);
    PrintPipelineVerdict(k.fault, r);
    INFO(k.fault);
    CHECK(LabelText(r.report.job.verdict) == "CLEAR");
    CHECK(r.report.job.verdict.sync_group == k.group);
    RequireTop(r, k.stage, k.rank);
  }
}

// A rank that leaves its group's collective late reaches the next collective late with
// nothing slower of its own in between (Gloo on busy cores hands one rank of a 2-rank
// all-reduce its result last, step after step). Within the step the late exit looks like a
// late start of the peer that waited least, which the frontier charges; the next wait
// (loss_sync) measures the exit (exit_lag.h). A small one is the collective's spread: no rank
// is named. One that costs the job is named on the rank that left late, not on its peer (CLEAR
// on (dp_sync, 2) before LateExitRule). The real runs' CLEAR on a rank's loss_sync, which
// CollectiveExitRule settles, does not show here: the simulated arrivals are too even.
TEST_CASE("pipeline: a late exit from dp_sync before a job-wide collective",
          "[scenario][pipeline]") {
  for (const char* fault :
       {"exit:dp_sync:rank=3:magnitude=500us", "exit:dp_sync:rank=3:magnitude=1ms"}) {
    SimConfig c = PpLossSync(2, 2);
    c.exit_jitter_ns = 300'000;  // as Gloo's on 2 busy cores
    c.faults.push_back(MustFault(fault));
    ScenarioResult r = RunScenario(c);
    PrintPipelineVerdict(fault, r);
    INFO(fault);
    CHECK(LabelText(r.report.job.verdict) == "HEALTHY");
    CHECK(HealthyWindows(r) == static_cast<int>(r.window_verdicts.size()));
  }
  for (const char* fault :
       {"exit:dp_sync:rank=3:magnitude=8ms", "exit:dp_sync:rank=3:magnitude=24ms:every=3"}) {
    SimConfig c = PpLossSync(2, 2);
    c.exit_jitter_ns = 300'000;
    c.faults.push_back(MustFault(fault));
    ScenarioResult r = RunScenario(c);
    PrintPipelineVerdict(fault, r);
    INFO(fault);
    CHECK(LabelText(r.report.job.verdict) == "CLEAR");
    CHECK(r.report.job.verdict.sync_group == "pp1");
    RequireTop(r, "dp_sync", 3);
  }
}

}  // namespace
}  // namespace stagefrontier::testing
