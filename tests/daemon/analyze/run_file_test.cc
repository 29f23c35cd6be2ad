#include "daemon/analyze/run_file.h"

#include <catch2/catch.hpp>
#include <random>
#include <sstream>

namespace stagefrontier {
namespace {

const char* kSchema = R"([["data","io"],["compute","compute"],["sync","sync"]])";

std::string Record(int rank, int step, const std::string& boundaries = "[0,10,20,30]",
                   const std::string& schema = kSchema, const std::string& extra = "") {
  return std::string(R"({"job":"j","world_size":2,"rank":)") + std::to_string(rank) +
         R"(,"step":)" + std::to_string(step) + R"(,"schema":)" + schema + R"(,"boundaries_ns":)" +
         boundaries + extra + "}";
}

absl::StatusOr<RecordedRun> Parse(const std::string& text) {
  std::istringstream in(text);
  return ParseRun(in);
}

std::string Error(const std::string& text) {
  absl::StatusOr<RecordedRun> run = Parse(text);
  REQUIRE_FALSE(run.ok());
  CHECK(run.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(run.status().message());
}

TEST_CASE("a valid run groups records by step", "[run_file]") {
  absl::StatusOr<RecordedRun> run =
      Parse(Record(0, 1) + "\n" + Record(1, 1) + "\n\n" + Record(0, 2) + "\n");
  REQUIRE(run.ok());
  CHECK(run->job == "j");
  CHECK(run->world_size == 2);
  CHECK(run->records == 3);
  CHECK(run->steps.size() == 2);
  CHECK(run->steps.at(1).ranks.size() == 2);
  CHECK(run->schema->ToString() == "data:io,compute:compute,sync:sync");
  CHECK(run->groups.empty());
}

TEST_CASE("format and parse round-trip, probe and group included", "[run_file]") {
  StageSchema schema = *StageSchema::Parse("data:io,backward:mixed");
  RankStep r{1, {100, 200, 500}, {}};
  r.probe.push_back(ProbeSpan{.stage = 1,
                              .enter_ns = 300,
                              .exit_ns = 450,
                              .op = ProbeSpan::kAnyOp,
                              .bytes = 0,
                              .call_ns = 300});
  std::string text = FormatRunRecord("job-7", 2, schema, 9, r, 1) + "\n" +
                     FormatRunRecord("job-7", 2, schema, 9, RankStep{0, {5, 6, 7}, {}}, 0);
  absl::StatusOr<RecordedRun> run = Parse(text);
  REQUIRE(run.ok());
  const RankStep& back = run->steps.at(9).ranks[0];
  CHECK(back.boundaries_ns == r.boundaries_ns);
  REQUIRE(back.probe.size() == 1);
  CHECK(back.probe[0].enter_ns == 300);
  CHECK(run->groups == std::vector<std::vector<int32_t>>{{0}, {1}});
}

TEST_CASE("malformed input: each error names the line and the field", "[run_file]") {
  const std::string ok = Record(0, 1) + "\n";
  SECTION("truncated line") {
    CHECK(Error(ok + R"({"job":"j","world_size":2,"rank":1)") ==
          "line 2: not valid JSON (truncated or malformed record)");
  }
  SECTION("wrong types") {
    CHECK(Error(R"({"job":"j","world_size":2,"rank":"1","step":1})") ==
          "line 1: field \"rank\": expected an integer, got string");
    CHECK(Error(Record(0, 1, "[0,10,\"x\",30]")) ==
          "line 1: field \"boundaries_ns\": element 2 is string, not an integer");
    CHECK(Error(Record(0, 1, "12")) ==
          "line 1: field \"boundaries_ns\": expected an array, got number");
    CHECK(Error(R"({"job":3})") == "line 1: field \"job\": expected a string, got number");
    CHECK(Error("[1,2]") == "line 1: expected a JSON object, got array");
  }
  SECTION("missing field") {
    CHECK(Error(R"({"job":"j","world_size":2,"rank":1})") == "line 1: missing field \"step\"");
  }
  SECTION("schema mismatch between ranks") {
    CHECK(Error(ok + Record(1, 1, "[0,10,20,30]",
                            R"([["data","io"],["compute","compute"],["sync","mixed"]])")) ==
          "line 2: field \"schema\": rank 1's schema \"data:io,compute:compute,sync:mixed\" "
          "differs from the job's "
          "\"data:io,compute:compute,sync:sync\" (line 1)");
    CHECK(Error(Record(0, 1, "[0,10,20,30]", R"([["data","disk"]])")) ==
          "line 1: field \"schema\": unknown stage kind \"disk\" (expected io, compute, sync, "
          "mixed, p2p or tensor)");
  }
  SECTION("negative durations") {
    CHECK(Error(ok + Record(1, 1, "[0,10,5,30]")) ==
          "line 2: field \"boundaries_ns\": rank 1: stage \"compute\" has a negative duration (-5 "
          "ns)");
  }
  SECTION("wrong number of boundaries") {
    CHECK(Error(Record(0, 1, "[0,10,20]")) ==
          "line 1: field \"boundaries_ns\": rank 0 reported 3 boundaries; the schema needs 4");
  }
  SECTION("duplicate (rank, step)") {
    CHECK(Error(ok + Record(1, 1) + "\n" + Record(0, 1)) ==
          "line 3: rank 0 step 1 already appeared on line 1");
  }
  SECTION("rank out of range, job and world size mismatches, empty run") {
    CHECK(Error(Record(2, 1)) == "line 1: field \"rank\": 2 is outside [0, 2)");
    std::string other_job = Record(1, 1);
    other_job.replace(other_job.find("\"j\""), 3, "\"k\"");
    CHECK(Error(ok + other_job) ==
          "line 2: field \"job\": \"k\" differs from \"j\" on line 1 (one job per file)");
    CHECK(Error("") == "no records (empty run file)");
    CHECK(Error(Record(0, 1, "[0,10,20,30]", kSchema, R"(,"probe":[[9,1,2]])")) ==
          "line 1: field \"probe\": rank 0: probe span names stage 9 but the schema has 3");
  }
}

TEST_CASE("fuzz: mutated and truncated records fail cleanly or parse", "[run_file][fuzz]") {
  std::mt19937_64 rng(42);
  const std::string seed = Record(0, 1) + "\n" +
                           Record(1, 1, "[5,15,25,35]", kSchema, R"(,"group":0)") + "\n" +
                           Record(0, 2, "[100,110,120,130]") + "\n";
  const std::string alphabet = "{}[]\",:0123456789-e.abcdefghijklmnopqrstuvwxyz \n\\\x00\xff";
  int parsed = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string text = seed;
    const int edits = 1 + static_cast<int>(rng() % 6);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const size_t at = rng() % text.size();
      switch (rng() % 4) {
        case 0:
          text[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          text.erase(at, 1 + rng() % 8);
          break;
        case 2:
          text.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
        case 3:
          text.resize(at);
          break;
      }
    }
    absl::StatusOr<RecordedRun> run = Parse(text);
    if (run.ok()) {
      ++parsed;
      CHECK(run->records > 0);
    } else {
      CHECK(run.status().code() == absl::StatusCode::kInvalidArgument);
      CHECK_FALSE(run.status().message().empty());
    }
  }
  WARN("fuzz: " << parsed << " of 20000 mutants still parsed");
}

}  // namespace
}  // namespace stagefrontier
