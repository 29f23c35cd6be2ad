#include "daemon/captures/capture_store.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "daemon/captures/capture_compression.h"
#include "tests/daemon/captures/capture_chunk_builder.h"
#include "daemon/captures/capture_file_name.h"

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
        "trace_rank1_step1.jso"}) {
    INFO(bad);
    CHECK_FALSE(ParseCaptureFileName(bad).has_value());
  }
  CHECK(IsCapturePartFileName("trace_rank3_step120.json.4242.part"));
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

}  // namespace
}  // namespace stagefrontier
