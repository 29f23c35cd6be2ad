// The coordinator's flags: defaults and unit conversions, usage errors (exit 2 before
// anything starts) and the checks after parsing, with the messages operators know.
#include "daemon/coordinator/coordinator_options.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace stagefrontier {
namespace {

std::optional<int> Parse(std::vector<std::string> args, CoordinatorOptions* o) {
  args.insert(args.begin(), "stagefrontier-coordinator");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ParseCoordinatorOptions(static_cast<int>(argv.size()), argv.data(), o);
}

TEST_CASE("defaults and units") {
  CoordinatorOptions o;
  REQUIRE_FALSE(Parse({"--data-dir", "/d"}, &o));
  CHECK(o.listen == "127.0.0.1:7311");
  CHECK(o.metrics_listen == "127.0.0.1:7312");
  CHECK(o.engine.window_steps == 100);
  CHECK(o.limits.max_job_memory_bytes == int64_t{8} << 30);
  CHECK(o.limits.max_memory_bytes == 0);
  CHECK(o.drain.timeout == std::chrono::seconds(30));
  CHECK(o.selftest.lease_ns == 30'000'000'000);
  CHECK(o.store.root == "/d/captures");
  CHECK(o.fleet.path == "/d/sweeps.ledger");
  CHECK(o.fleet.fsync);
  CHECK(o.captures);
  CHECK(o.AllowedJobs().empty());
  CHECK(ValidateCoordinatorOptions(o).ok());
}

TEST_CASE("flags in other units are converted") {
  CoordinatorOptions o;
  REQUIRE_FALSE(Parse({"--data-dir",
                       "/d",
                       "--max-job-memory-mb",
                       "3",
                       "--max-memory-mb",
                       "5",
                       "--drain-timeout-s",
                       "7",
                       "--capture-max-mb",
                       "2",
                       "--capture-keep-mb",
                       "9",
                       "--capture-keep-job-mb",
                       "4",
                       "--selftest-lease-s",
                       "11",
                       "--no-fsync",
                       "--no-captures",
                       "--jobs",
                       "a,b,,c",
                       "--window-steps",
                       "50"},
                      &o));
  CHECK(o.limits.max_job_memory_bytes == 3 << 20);
  CHECK(o.limits.max_memory_bytes == 5 << 20);
  CHECK(o.drain.timeout == std::chrono::seconds(7));
  CHECK(o.store.max_file_bytes == 2 << 20);
  CHECK(o.store.max_total_bytes == 9 << 20);
  CHECK(o.store.max_job_bytes == 4 << 20);
  CHECK(o.selftest.lease_ns == 11'000'000'000);
  CHECK_FALSE(o.fleet.fsync);
  CHECK_FALSE(o.captures);
  CHECK(o.AllowedJobs() == std::set<std::string>{"a", "b", "c"});
  CHECK(o.engine.window_steps == 50);
}

TEST_CASE("usage errors exit 2, --help 0") {
  CoordinatorOptions o;
  CHECK(Parse({}, &o) == 2);  // --data-dir is required
  CHECK(Parse({"--data-dir", "/d", "--listen", "127.0.0.1:99999"}, &o) == 2);
  CHECK(Parse({"--data-dir", "/d", "--metrics-listen", "7312"}, &o) == 2);
  CHECK(Parse({"--data-dir", "/d", "--window-steps", "1"}, &o) == 2);
  CHECK(Parse({"--data-dir", "/d", "--data-dri", "/x"}, &o) == 2);
  CoordinatorOptions h;
  CHECK(Parse({"--help"}, &h) == 0);
}

TEST_CASE("--ingest-shards: 1 by default, 1..16") {
  CoordinatorOptions o;
  REQUIRE_FALSE(Parse({"--data-dir", "/d"}, &o));
  CHECK(o.ingest_shards == 1);
  REQUIRE_FALSE(Parse({"--data-dir", "/d", "--ingest-shards", "4"}, &o));
  CHECK(o.ingest_shards == 4);
  REQUIRE_FALSE(Parse({"--data-dir", "/d", "--ingest-shards", "16"}, &o));
  CHECK(o.ingest_shards == 16);
  for (const char* bad : {"0", "17", "-1", "two"}) {
    CoordinatorOptions b;
    CHECK(Parse({"--data-dir", "/d", "--ingest-shards", bad}, &b) == 2);
  }
}

TEST_CASE("--http2-bdp-probe: off by default") {
  CoordinatorOptions o;
  REQUIRE_FALSE(Parse({"--data-dir", "/d"}, &o));
  CHECK_FALSE(o.http2_bdp_probe);
  REQUIRE_FALSE(Parse({"--data-dir", "/d", "--http2-bdp-probe"}, &o));
  CHECK(o.http2_bdp_probe);
}

TEST_CASE("a bad --probe-bracket is named") {
  CoordinatorOptions o;
  REQUIRE_FALSE(Parse({"--data-dir", "/d", "--probe-bracket", "all_reduce"}, &o));
  absl::Status s = ValidateCoordinatorOptions(o);
  REQUIRE_FALSE(s.ok());
  CHECK(std::string(s.message()).rfind("--probe-bracket: bracketing rule", 0) == 0);
}

}  // namespace
}  // namespace stagefrontier
