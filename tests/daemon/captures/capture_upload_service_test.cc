#include "daemon/captures/capture_upload_service.h"

#include <grpcpp/grpcpp.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "daemon/captures/capture_compression.h"
#include "tests/daemon/captures/capture_chunk_builder.h"

namespace stagefrontier {
namespace {

std::string TempDir() {
  char dir[] = "/tmp/sf_capture_upload_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  return dir;
}

using testing::MakeChunk;

// A real gRPC server (in-process channel) with the service over a real store.
struct Fixture {
  explicit Fixture(size_t max_queued = 16) : root(TempDir()), store({.root = root}) {
    REQUIRE(store.Open().ok());
    service = std::make_unique<CaptureUploadService>(&store, "s3cret", nullptr, max_queued);
    grpc::ServerBuilder b;
    b.RegisterService(service.get());
    server = b.BuildAndStart();
    stub = v1::CaptureCollection::NewStub(server->InProcessChannel(grpc::ChannelArguments()));
  }
  ~Fixture() {
    server->Shutdown();
    service.reset();  // after the server, as the coordinator does
  }
  grpc::Status Upload(const v1::CaptureChunk& chunk, v1::CaptureChunkAck* ack,
                      const std::string& token = "s3cret") {
    grpc::ClientContext context;
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    return stub->Upload(&context, chunk, ack);
  }
  std::string root;
  CaptureStore store;
  std::unique_ptr<CaptureUploadService> service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::CaptureCollection::Stub> stub;
};

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

TEST_CASE("chunks are stored on the worker; the token and the store's refusals are answered") {
  Fixture f;
  const std::string whole(3000, 'x');
  v1::CaptureChunkAck ack;
  CHECK(
      f.Upload(MakeChunk("trace_rank1_step10.json", whole, 0, 3000), &ack, "wrong").error_code() ==
      grpc::UNAUTHENTICATED);
  CHECK(f.Upload(MakeChunk("trace_rank1_step10.json", whole, 0, 3000), &ack, "").error_code() ==
        grpc::UNAUTHENTICATED);
  grpc::Status first = f.Upload(MakeChunk("trace_rank1_step10.json", whole, 0, 1000), &ack);
  REQUIRE(first.ok());
  CHECK(!ack.complete());
  CHECK(ack.next_offset() == 1000);
  REQUIRE(f.Upload(MakeChunk("trace_rank1_step10.json", whole, 1000, 2000), &ack).ok());
  CHECK(ack.complete());
  CHECK(Exists(f.root + "/job1/trace_rank1_step10.json"));
  // The store's own refusal comes back with its code.
  grpc::Status bad = f.Upload(MakeChunk("../escape.json", whole, 0, 3000), &ack);
  CHECK(bad.error_code() == grpc::INVALID_ARGUMENT);
  CHECK(f.service->busy_refusals() == 0);
}

TEST_CASE("beyond max_queued waiting chunks, an upload is UNAVAILABLE (sent again later)") {
  Fixture f(/*max_queued=*/0);
  v1::CaptureChunkAck ack;
  grpc::Status s =
      f.Upload(MakeChunk("trace_rank1_step10.json", std::string(10, 'x'), 0, 10), &ack);
  CHECK(s.error_code() == grpc::UNAVAILABLE);
  CHECK_THAT(s.error_message(), Catch::Contains("capture uploads are busy"));
  CHECK(f.service->busy_refusals() == 1);
}

TEST_CASE("many concurrent uploads, one worker: every file is stored whole") {
  Fixture f(/*max_queued=*/64);
  constexpr int kThreads = 6, kFiles = 4;
  std::atomic<int> stored{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kFiles; ++i) {
        const std::string name =
            "trace_rank" + std::to_string(t) + "_step" + std::to_string(i * 10) + ".json";
        const std::string whole(5000 + 100 * t, static_cast<char>('a' + i));
        v1::CaptureChunkAck ack;
        bool ok = true;
        for (size_t off = 0; ok && off < whole.size(); off += 1000) {
          const size_t n = std::min<size_t>(1000, whole.size() - off);
          ok = f.Upload(MakeChunk(name, whole, off, n), &ack).ok();
        }
        (ok && ack.complete() ? stored : failed)++;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(failed == 0);
  CHECK(stored == kThreads * kFiles);
  CHECK(f.store.counters().files == static_cast<uint64_t>(kThreads * kFiles));
}

}  // namespace
}  // namespace stagefrontier
