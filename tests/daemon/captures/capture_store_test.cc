#include "daemon/captures/capture_store.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <tuple>

#include "daemon/captures/capture_compression.h"
#include "daemon/captures/capture_file_name.h"
#include "tests/daemon/captures/capture_chunk_builder.h"

namespace stagefrontier {
namespace {

std::string TempDir() {
  char dir[] = "/tmp/sf_capture_store_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  return dir;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Payload(size_t n) {
  std::string s;
  for (size_t i = 0; s.size() < n; ++i)
    s += "{\"name\": \"aten::mm\", \"ts\": " + std::to_string(i) + "},";
  s.resize(n);
  return s;
}

using testing::MakeChunk;

TEST_CASE("capture file names: parsed only in their exact form") {
  auto n = ParseCaptureFileName("trace_rank3_step120.json");
  REQUIRE(n.has_value());
  CHECK(n->rank == 3);
  CHECK(n->first_step == 120);
  CHECK(CaptureFileNameFor(3, 120) == "trace_rank3_step120.json");
  for (const char* bad :
       {"trace_rank3_step120.json.part", "trace_rank3_step120.json.uploaded",
        "trace_rank_step1.json", "trace_rank-1_step1.json", "x/trace_rank1_step1.json",
        "trace_rank1_step.json", "trace_rank99999999999_step1.json", "trace_rank1.json",
        "trace_rank1_step1.jso", "trace_rank03_step120.json", "trace_rank3_step0120.json"}) {
    INFO(bad);
    CHECK_FALSE(ParseCaptureFileName(bad).has_value());
  }
  CHECK(IsCapturePartFileName("trace_rank3_step120.json.4242.part"));
  n = ParseCaptureFileName("stacks_rank2_capture17.txt");
  REQUIRE(n.has_value());
  CHECK(n->kind == CaptureFileKind::kStacks);
  CHECK(n->rank == 2);
  CHECK(n->capture_id == 17);
  CHECK(n->first_step == -1);
  n = ParseCaptureFileName(FlightRecorderFileNameFor(5, 3));
  REQUIRE(n.has_value());
  CHECK(n->kind == CaptureFileKind::kFlightRecorder);
  CHECK(n->rank == 5);
  CHECK(n->capture_id == 3);
  CHECK(StacksFileNameFor(2, 17) == "stacks_rank2_capture17.txt");
  CHECK(IsCapturePartFileName("stacks_rank2_capture17.txt.99.part"));
  for (const char* bad :
       {"stacks_rank2_capture0.txt", "stacks_rank2_capture17.json", "stacks_rank2_step17.txt",
        "flightrec_rank2_capture17.txt", "stacks_rank_capture1.txt", "stacks_rank1_capture-1.txt",
        "stacks_rank02_capture17.txt", "flightrec_rank2_capture017.json"}) {
    INFO(bad);
    CHECK_FALSE(ParseCaptureFileName(bad).has_value());
  }
  for (const char* bad :
       {"trace_rank3_step120.json.part", "trace_rank3_step120.json.x.part",
        "trace_rank3_step120.json.4242", "notes.4242.part", "trace_rank3_step.json.1.part"}) {
    INFO(bad);
    CHECK_FALSE(IsCapturePartFileName(bad));
  }
}

TEST_CASE("capture chunks: inflate exactly, refuse the rest") {
  const std::string raw = Payload(100000);
  const std::string packed = DeflateChunk(raw);
  CHECK(packed.size() < raw.size() / 4);
  REQUIRE(InflateChunk(packed, raw.size()).ok());
  CHECK(*InflateChunk(packed, raw.size()) == raw);
  CHECK(InflateChunk(packed, raw.size() - 1).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(InflateChunk(packed, raw.size() + 1).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(InflateChunk(packed.substr(0, packed.size() / 2), raw.size()).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(InflateChunk("not zlib at all", 10).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(InflateChunk(packed + "tail", raw.size()).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("capture store: chunks in order make the file, renamed when complete") {
  const std::string root = TempDir() + "/captures";
  CaptureStore store({.root = root});
  REQUIRE(store.Open().ok());
  std::vector<StoredCapture> completed;
  store.SetOnComplete([&](const StoredCapture& f) { completed.push_back(f); });
  const std::string whole = Payload(250000);
  const std::string name = "trace_rank2_step40.json";
  for (size_t off = 0; off < whole.size(); off += 100000) {
    const size_t n = std::min<size_t>(100000, whole.size() - off);
    absl::StatusOr<v1::CaptureChunkAck> ack = store.Accept(MakeChunk(name, whole, off, n));
    REQUIRE(ack.ok());
    CHECK(ack->next_offset() == off + n);
    CHECK(ack->complete() == (off + n == whole.size()));
  }
  CHECK(Slurp(root + "/job1/" + name) == whole);
  struct stat st {};
  CHECK(::stat((root + "/job1/" + name + ".part").c_str(), &st) != 0);
  REQUIRE(completed.size() == 1);
  CHECK(completed[0].rank == 2);
  CHECK(completed[0].first_step == 40);
  CHECK(completed[0].bytes == whole.size());
  CHECK(store.counters().files == 1);
  // A resend after a lost ack: already complete, nothing written again.
  absl::StatusOr<v1::CaptureChunkAck> again = store.Accept(MakeChunk(name, whole, 0, 100000));
  REQUIRE(again.ok());
  CHECK(again->complete());
  CHECK(store.counters().files == 1);
  // A restarted coordinator finds it: the directory is the index.
  CaptureStore reopened({.root = root});
  REQUIRE(reopened.Open().ok());
  REQUIRE(reopened.Files("job1").size() == 1);
  CHECK(reopened.Files("").size() == 1);
}

TEST_CASE("capture store: an upload cut short resumes at what is held") {
  const std::string root = TempDir();
  const std::string whole = Payload(30000);
  const std::string name = "trace_rank0_step7.json";
  {
    CaptureStore store({.root = root});
    REQUIRE(store.Open().ok());
    REQUIRE(store.Accept(MakeChunk(name, whole, 0, 10000)).ok());
  }
  CaptureStore store({.root = root});  // the coordinator restarted
  REQUIRE(store.Open().ok());
  // The sidecar restarted too and begins again at 0: told to go on from 10000.
  absl::StatusOr<v1::CaptureChunkAck> ack = store.Accept(MakeChunk(name, whole, 0, 10000));
  REQUIRE(ack.ok());
  CHECK(ack->next_offset() == 10000);
  CHECK_FALSE(ack->complete());
  // A chunk past what is held is not written either.
  ack = store.Accept(MakeChunk(name, whole, 20000, 10000));
  REQUIRE(ack.ok());
  CHECK(ack->next_offset() == 10000);
  REQUIRE(store.Accept(MakeChunk(name, whole, 10000, 10000)).ok());
  ack = store.Accept(MakeChunk(name, whole, 20000, 10000));
  REQUIRE(ack.ok());
  CHECK(ack->complete());
  CHECK(Slurp(root + "/job1/" + name) == whole);
}

TEST_CASE("capture store: an upload abandoned for an hour is dropped; its sidecar starts over") {
  const std::string root = TempDir();
  const std::string whole = Payload(30000);
  CaptureStore store({.root = root});
  REQUIRE(store.Open().ok());
  REQUIRE(store.Accept(MakeChunk("trace_rank0_step7.json", whole, 0, 10000)).ok());
  REQUIRE(store.Accept(MakeChunk("trace_rank1_step7.json", whole, 0, 10000)).ok());
  REQUIRE(store.Accept(MakeChunk("trace_rank2_step7.json", whole, 0, 30000)).ok());  // complete
  const int64_t now = ::time(nullptr);
  CHECK(store.RemoveAbandonedUploads(now) == 0);  // both uploads just got a chunk
  // An hour later, rank 1's upload got another chunk; rank 0's got none.
  const struct timespec hour_ago[2] = {{now - 3600, 0}, {now - 3600, 0}};
  REQUIRE(::utimensat(AT_FDCWD, (root + "/job1/trace_rank0_step7.json.part").c_str(), hour_ago,
                      0) == 0);
  REQUIRE(::utimensat(AT_FDCWD, (root + "/job1/trace_rank2_step7.json").c_str(), hour_ago, 0) == 0);
  CHECK(store.RemoveAbandonedUploads(now) == 1);
  struct stat st {};
  CHECK(::stat((root + "/job1/trace_rank0_step7.json.part").c_str(), &st) != 0);
  CHECK(::stat((root + "/job1/trace_rank1_step7.json.part").c_str(), &st) == 0);
  CHECK(::stat((root + "/job1/trace_rank2_step7.json").c_str(), &st) == 0);  // complete: kept
  CHECK(store.counters().abandoned == 1);
  // The sidecar comes back: told to start at 0, and the file completes.
  absl::StatusOr<v1::CaptureChunkAck> ack =
      store.Accept(MakeChunk("trace_rank0_step7.json", whole, 10000, 20000));
  REQUIRE(ack.ok());
  CHECK(ack->next_offset() == 0);
  REQUIRE(store.Accept(MakeChunk("trace_rank0_step7.json", whole, 0, 30000)).ok());
  CHECK(Slurp(root + "/job1/trace_rank0_step7.json") == whole);
}

TEST_CASE("capture store: bad chunks get specific errors and a count") {
  const std::string root = TempDir();
  CaptureStore store({.root = root, .max_file_bytes = 50000});
  REQUIRE(store.Open().ok());
  const std::string whole = Payload(20000);
  auto code = [&](v1::CaptureChunk c) { return store.Accept(c).status().code(); };
  v1::CaptureChunk c = MakeChunk("trace_rank0_step1.json", whole, 0, 10000, "../etc");
  CHECK(code(c) == absl::StatusCode::kInvalidArgument);
  c = MakeChunk("../../passwd", whole, 0, 10000);
  CHECK(code(c) == absl::StatusCode::kInvalidArgument);
  c = MakeChunk("trace_rank0_step1.json", whole, 0, 10000);
  c.set_file_bytes(60000);
  absl::Status big = store.Accept(c).status();
  CHECK(big.code() == absl::StatusCode::kResourceExhausted);
  CHECK(std::string(big.message()).find("--capture-max-mb") != std::string::npos);
  c = MakeChunk("trace_rank0_step1.json", whole, 0, 10000);
  c.set_raw_bytes(12000);  // does not inflate to what it says
  CHECK(code(c) == absl::StatusCode::kInvalidArgument);
  c = MakeChunk("trace_rank0_step1.json", whole, 15000, 5000);
  c.set_offset(18000);  // runs past the file's end
  CHECK(code(c) == absl::StatusCode::kInvalidArgument);
  c = MakeChunk("trace_rank0_step1.json", whole, 0, 10000);
  c.set_data("garbage");
  CHECK(code(c) == absl::StatusCode::kInvalidArgument);
  CHECK(store.counters().refused == 6);
  CHECK(store.Files("").empty());
  // Nothing was written for the refused chunk: the good one starts at 0.
  absl::StatusOr<v1::CaptureChunkAck> ack =
      store.Accept(MakeChunk("trace_rank0_step1.json", whole, 0, 10000));
  REQUIRE(ack.ok());
  CHECK(ack->next_offset() == 10000);
}

TEST_CASE("capture store: a huge file name or job id is refused with a short message") {
  const std::string root = TempDir();
  CaptureStore store({.root = root});
  REQUIRE(store.Open().ok());
  const std::string whole = Payload(1000);
  const std::string huge(1 << 20, 'a');
  for (v1::CaptureChunk c : {MakeChunk(huge + ".json", whole, 0, 1000),
                             MakeChunk("trace_rank0_step1.json", whole, 0, 1000, huge)}) {
    const absl::Status s = store.Accept(c).status();
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(s.message().size() < 300);
  }
  CHECK(store.counters().refused == 2);
  CHECK(store.Files("").empty());
}

TEST_CASE("capture store: retention drops the oldest files by count and bytes") {
  const std::string root = TempDir();
  CaptureStore store({.root = root, .max_total_bytes = 25000, .max_files = 3});
  REQUIRE(store.Open().ok());
  const std::string whole = Payload(10000);
  for (int r = 0; r < 5; ++r) {
    const std::string name = CaptureFileNameFor(r, 100);
    REQUIRE(store.Accept(MakeChunk(name, whole, 0, whole.size(), r % 2 ? "jobB" : "jobA")).ok());
  }
  // 25000 bytes hold two files of 10000.
  const std::vector<StoredCapture> left = store.Files("");
  REQUIRE(left.size() == 2);
  CHECK((left[0].rank == 4 || left[1].rank == 4));  // the newest stays
  CHECK(store.counters().evicted == 3);
}

// Regression (issue 28, attack 4): 20 uploads stopped one byte short held 1.3 GB of ".part"
// files against a 40 MB bound, in no metric.
TEST_CASE("capture store: uploads in flight reserve their size against the bound") {
  const std::string root = TempDir();
  CaptureStore store({.root = root, .max_total_bytes = 40000, .max_uploads_per_node = 100});
  REQUIRE(store.Open().ok());
  const std::string whole = Payload(15000);
  int admitted = 0, refused = 0;
  for (int r = 0; r < 20; ++r) {
    const auto ack = store.Accept(
        MakeChunk(CaptureFileNameFor(r, 100), whole, 0, whole.size() - 1, "jobX"));  // 1 short
    if (ack.ok()) {
      ++admitted;
    } else {
      CHECK(absl::IsUnavailable(ack.status()));  // sent again later, not refused for good
      CHECK_THAT(std::string(ack.status().message()), Catch::Contains("no room"));
      ++refused;
    }
  }
  CHECK(admitted == 2);  // 2 x 15000 reserved; a third would pass 40000
  CHECK(refused == 18);
  const CaptureStore::Counters c = store.counters();
  CHECK(c.partial_uploads == 2);
  CHECK(c.partial_bytes == 2 * 14999);
  CHECK(c.refused_busy == 18);
  // A file larger than the whole bound is refused for good.
  const std::string huge = Payload(50000);
  const auto big = store.Accept(MakeChunk(CaptureFileNameFor(30, 100), huge, 0, 1000, "jobY"));
  CHECK(absl::IsResourceExhausted(big.status()));
  // A restarted store finds the uploads in flight and still counts them.
  CaptureStore again({.root = root, .max_total_bytes = 40000, .max_uploads_per_node = 100});
  REQUIRE(again.Open().ok());
  CHECK(again.counters().partial_uploads == 2);
  CHECK(!again.Accept(MakeChunk(CaptureFileNameFor(40, 100), whole, 0, 100, "jobZ")).ok());
  // Finishing an upload frees nothing it did not hold; abandoning them frees the room.
  CHECK(again.RemoveAbandonedUploads(::time(nullptr) + 7200) == 2);
  CHECK(again.counters().partial_uploads == 0);
  CHECK(again.Accept(MakeChunk(CaptureFileNameFor(40, 100), whole, 0, 100, "jobZ")).ok());
}

TEST_CASE("capture store: at most so many uploads in flight per node and per job") {
  CaptureStore store({.root = TempDir(), .max_uploads_per_job = 3, .max_uploads_per_node = 2});
  REQUIRE(store.Open().ok());
  const std::string whole = Payload(1000);
  auto start = [&](int rank, const std::string& job, const std::string& node) {
    v1::CaptureChunk c = MakeChunk(CaptureFileNameFor(rank, 100), whole, 0, 10, job);
    c.set_node(node);
    return store.Accept(c).status();
  };
  CHECK(start(0, "jobA", "n1").ok());
  CHECK(start(1, "jobA", "n1").ok());
  const absl::Status third = start(2, "jobA", "n1");
  CHECK(absl::IsUnavailable(third));
  CHECK_THAT(std::string(third.message()), Catch::Contains("node n1 has 2 uploads in flight"));
  CHECK(start(2, "jobA", "n2").ok());  // another node
  const absl::Status fourth = start(3, "jobA", "n3");
  CHECK(absl::IsUnavailable(fourth));
  CHECK_THAT(std::string(fourth.message()), Catch::Contains("job jobA has 3 uploads in flight"));
  CHECK(start(0, "jobB", "n3").ok());  // another job
  // The uploads admitted go on.
  v1::CaptureChunk rest = MakeChunk(CaptureFileNameFor(0, 100), whole, 10, 990, "jobA");
  rest.set_node("n1");
  const auto done = store.Accept(rest);
  REQUIRE(done.ok());
  CHECK(done->complete());
  CHECK(start(2, "jobA", "n1").ok());  // room again on n1
}

// Regression (issue 28, attack 4): 60 tiny uploads for a made-up job deleted every other job's
// stored traces, the evidence of real verdicts included.
TEST_CASE("capture store: a noisy job evicts its own files, never another job's evidence") {
  CaptureStore store(
      {.root = TempDir(), .max_total_bytes = 100000, .max_files = 20, .max_job_files = 5});
  REQUIRE(store.Open().ok());
  const std::string evidence = Payload(20000);
  for (int r = 0; r < 3; ++r) {
    REQUIRE(
        store.Accept(MakeChunk(CaptureFileNameFor(r, 100), evidence, 0, evidence.size(), "realjob"))
            .ok());
  }
  const std::string tiny = Payload(100);
  for (int r = 0; r < 60; ++r) {
    REQUIRE(store.Accept(MakeChunk(CaptureFileNameFor(r, 5), tiny, 0, tiny.size(), "noisy")).ok());
  }
  CHECK(store.Files("realjob").size() == 3);  // untouched
  CHECK(store.Files("noisy").size() == 5);    // its own bound
  // At the store's byte bound, the job holding the most gives way first.
  const std::string big = Payload(30000);
  REQUIRE(store.Accept(MakeChunk(CaptureFileNameFor(0, 7), big, 0, big.size(), "other")).ok());
  REQUIRE(store.Accept(MakeChunk(CaptureFileNameFor(1, 7), big, 0, big.size(), "other")).ok());
  CHECK(store.Files("noisy").size() == 5);
  CHECK(store.Files("other").size() == 2);
  CHECK(store.Files("realjob").size() == 1);  // 60000 + 500 + 60000 > 100000: the biggest
}

TEST_CASE("capture store: only files of captures the coordinator asked are taken") {
  CaptureStore store({.root = TempDir()});
  REQUIRE(store.Open().ok());
  store.SetExpected([](const std::string& job, const CaptureFileName& name) {
    return job == "job1" && name.rank == 2 &&
           (name.kind == CaptureFileKind::kTrace ? name.first_step == 100 : name.capture_id == 7);
  });
  const std::string whole = Payload(500);
  CHECK(store.Accept(MakeChunk(CaptureFileNameFor(2, 100), whole, 0, whole.size())).ok());
  // Stacks and flight recorder dumps of capture 7, not of capture 8.
  CHECK(store.Accept(MakeChunk(StacksFileNameFor(2, 7), whole, 0, whole.size())).ok());
  CHECK(store.Accept(MakeChunk(FlightRecorderFileNameFor(2, 7), whole, 0, whole.size())).ok());
  CHECK(absl::IsPermissionDenied(
      store.Accept(MakeChunk(StacksFileNameFor(2, 8), whole, 0, whole.size())).status()));
  const std::vector<StoredCapture> files = store.Files("job1");
  REQUIRE(files.size() == 3);
  CHECK(std::count_if(files.begin(), files.end(), [](const StoredCapture& f) {
          return f.kind == CaptureFileKind::kStacks && f.capture_id == 7 && f.rank == 2;
        }) == 1);
  for (const auto& [rank, step, job] : std::vector<std::tuple<int, int, std::string>>{
           {3, 100, "job1"}, {2, 101, "job1"}, {2, 100, "madeup"}}) {
    const auto ack = store.Accept(MakeChunk(CaptureFileNameFor(rank, step), whole, 0, 10, job));
    CHECK(absl::IsPermissionDenied(ack.status()));
    CHECK_THAT(std::string(ack.status().message()), Catch::Contains("asked no capture"));
  }
  CHECK(store.counters().refused_not_asked == 4);  // the three above and stacks of capture 8
  CHECK(store.Files("").size() == 3);
}

}  // namespace
}  // namespace stagefrontier
