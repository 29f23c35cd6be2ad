// The sidecar's flags: defaults, durations, usage errors (exit 2) and the cross-flag checks.
#include "daemon/sidecar/sidecar_options.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "daemon/sidecar/batch_hold.h"

namespace stagefrontier {
namespace {

std::optional<int> Parse(std::vector<std::string> args, SidecarOptions* o) {
  args.insert(args.begin(), "stagefrontier-sidecar");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ParseSidecarOptions(static_cast<int>(argv.size()), argv.data(), o);
}

TEST_CASE("sidecar flags fill the options") {
  SidecarOptions o;
  REQUIRE_FALSE(Parse({"--coordinator", "10.0.0.1:7311", "--poll-max-ms", "20", "--batch-delay-ms",
                       "5", "--health-every-ms", "300", "--health-quiet-ms", "1500",
                       "--health-max-gap-ms", "5000", "--shm-dir", "/x"},
                      &o));
  CHECK(o.stream.coordinator == "10.0.0.1:7311");
  CHECK(o.stream.poll_max == std::chrono::milliseconds(20));
  CHECK(o.stream.batch_delay == std::chrono::milliseconds(5));
  CHECK(o.stream.health.stalled_every_ns == 300'000'000);
  CHECK(o.stream.health.quiet_after_ns == 1'500'000'000);
  CHECK(o.stream.health.max_gap_ns == 5'000'000'000);
  CHECK(o.CaptureDirectory() == "/x/stagefrontier-captures");
  CHECK_FALSE(o.stream.node.empty());  // this host's name
}

TEST_CASE("the node's name sets where its batches end among the steps") {
  SidecarOptions a;
  REQUIRE_FALSE(Parse({"--node", "n7"}, &a));
  CHECK(a.stream.batch_hold.phase_seed == PhaseSeedFor("n7"));
  SidecarOptions b;
  REQUIRE_FALSE(Parse({"--node", "n8"}, &b));
  CHECK(b.stream.batch_hold.phase_seed != a.stream.batch_hold.phase_seed);
  SidecarOptions host;
  REQUIRE_FALSE(Parse({}, &host));
  CHECK(host.stream.batch_hold.phase_seed == PhaseSeedFor(host.stream.node));
}

TEST_CASE("the sidecar batches by itself unless --batch-delay-ms says otherwise") {
  SidecarOptions d;
  REQUIRE_FALSE(Parse({}, &d));
  CHECK(d.stream.batch_delay == StreamerOptions::kAutoBatching);
  SidecarOptions zero;
  REQUIRE_FALSE(Parse({"--batch-delay-ms", "0"}, &zero));
  CHECK(zero.stream.batch_delay == std::chrono::milliseconds(0));
  SidecarOptions bad;
  CHECK(Parse({"--batch-delay-ms", "-1"}, &bad) == 2);
}

TEST_CASE("health every second by default, and at once past a rank's open-stage limit") {
  SidecarOptions d;
  REQUIRE_FALSE(Parse({}, &d));
  CHECK(d.stream.health.stalled_every_ns == 1'000'000'000);
  CHECK(d.stream.health.quiet_after_ns == 9'500'000'000);  // capped by the coordinator's limits
  CHECK(d.stream.health.max_gap_ns == 30'000'000'000);
  CHECK(d.stream.open_stage_report == std::chrono::milliseconds(1000));
  SidecarOptions o;
  REQUIRE_FALSE(Parse({"--open-stage-report-ms", "2500"}, &o));
  CHECK(o.stream.open_stage_report == std::chrono::milliseconds(2500));
  SidecarOptions off;
  REQUIRE_FALSE(Parse({"--open-stage-report-ms", "0"}, &off));
  CHECK(off.stream.open_stage_report.count() == 0);
  SidecarOptions bad;
  CHECK(Parse({"--open-stage-report-ms", "-1"}, &bad) == 2);
  SidecarOptions gap;
  CHECK(Parse({"--health-max-gap-ms", "50"}, &gap) == 2);  // below 100 ms
}

TEST_CASE("sidecar usage errors exit 2, --help 0") {
  SidecarOptions o;
  CHECK(Parse({"--poll-max-ms", "0"}, &o) == 2);
  CHECK(Parse({"--slots", "2000"}, &o) == 2);
  CHECK(Parse({"--no-such-flag"}, &o) == 2);
  SidecarOptions h;
  CHECK(Parse({"--help"}, &h) == 0);
}

TEST_CASE("--route is parsed and checked against --job") {
  SidecarOptions o;
  REQUIRE_FALSE(Parse({"--route", "a=h:1", "--route", "b=h:2"}, &o));
  REQUIRE(ResolveSidecarOptions(&o).ok());
  CHECK(o.routes.size() == 2);

  SidecarOptions bad;
  REQUIRE_FALSE(Parse({"--route", "nojob"}, &bad));
  absl::Status s = ResolveSidecarOptions(&bad);
  CHECK(s.message().rfind("--route: ", 0) == 0);

  SidecarOptions both;
  REQUIRE_FALSE(Parse({"--route", "a=h:1", "--job", "a"}, &both));
  CHECK(std::string(ResolveSidecarOptions(&both).message())
            .find("--route and --job cannot be combined") == 0);
}

TEST_CASE("a missing token file is refused") {
  SidecarOptions o;
  REQUIRE_FALSE(Parse({"--token-file", "/nonexistent/token"}, &o));
  CHECK_FALSE(ResolveSidecarOptions(&o).ok());
}

}  // namespace
}  // namespace stagefrontier
