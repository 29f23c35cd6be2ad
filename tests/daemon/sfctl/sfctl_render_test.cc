#include "daemon/sfctl/sfctl_render.h"

#include <catch2/catch.hpp>
#include <string>

namespace stagefrontier {
namespace {

v1::SuspectsReply Reply(double baseline_ns) {
  v1::SuspectsReply r;
  r.set_job("job-1");
  r.set_window(32);
  v1::StageDashboard* d = r.add_stages();
  d->set_stage("data");
  d->set_kind("io");
  d->set_frontier_increment_ns(12e6);
  d->set_baseline_ns(baseline_ns);
  d->set_excess_ns(8e6);
  d->set_mean_dashboard_ns(5e6);
  d->set_mean_dashboard_baseline_ns(baseline_ns);
  d->set_max_dashboard_ns(12e6);
  d->set_max_dashboard_baseline_ns(baseline_ns);
  return r;
}

// Issue 30, item 10: a fault from step 0 leaves BASE "-" with nothing saying why.
TEST_CASE("suspects: a BASE of - is explained under the stage table") {
  const std::string text = RenderSuspects(Reply(-1));
  CHECK(text.find("  data           io") != std::string::npos);
  const size_t note = text.find("BASE -: no baseline yet for that stage");
  REQUIRE(note != std::string::npos);
  CHECK(note < text.find("  exposed step"));  // right under the table's rows
  CHECK(text.find("steps without excess", note) != std::string::npos);
  CHECK(text.find("peer ranks", note) != std::string::npos);
}

TEST_CASE("suspects: no note when every stage has its baselines") {
  const std::string text = RenderSuspects(Reply(4e6));
  CHECK(text.find("BASE -") == std::string::npos);
}

}  // namespace
}  // namespace stagefrontier
