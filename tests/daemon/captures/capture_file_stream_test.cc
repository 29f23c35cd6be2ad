// FetchCapture's callback stream over a real loopback gRPC server: a file larger than a chunk
// arrives whole and in order, an empty file as one empty chunk, a missing one as NOT_FOUND, a
// client that leaves mid-file ends the stream (ASan's leak check: the reactor is freed).
#include "daemon/captures/capture_file_stream.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <random>

#include "grpcpp/grpcpp.h"
#include "stagefrontier/v1/query.grpc.pb.h"

namespace stagefrontier {
namespace {

// Serves FetchCapture only: the file named in the request, from `dir`.
class FetchOnly final : public v1::Query::WithCallbackMethod_FetchCapture<v1::Query::Service> {
 public:
  explicit FetchOnly(std::string dir) : dir_(std::move(dir)) {}
  grpc::ServerWriteReactor<v1::CaptureFileChunk>* FetchCapture(
      grpc::CallbackServerContext*, const v1::FetchCaptureRequest* request) override {
    return CaptureFileStream::Start(dir_ + "/" + request->file_name(),
                                    "no capture file " + request->file_name());
  }

 private:
  std::string dir_;
};

struct Server {
  Server() {
    char d[] = "/tmp/sf_fetch_XXXXXX";
    REQUIRE(mkdtemp(d) != nullptr);
    dir = d;
    service = std::make_unique<FetchOnly>(dir);
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(service.get());
    server = b.BuildAndStart();
    REQUIRE(port > 0);
    stub = v1::Query::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                  grpc::InsecureChannelCredentials()));
  }
  ~Server() { server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2)); }
  std::string Write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
    return name;
  }
  std::string dir;
  std::unique_ptr<FetchOnly> service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::Query::Stub> stub;
};

struct Fetched {
  std::vector<v1::CaptureFileChunk> chunks;
  grpc::Status status;
};

Fetched Fetch(Server& s, const std::string& name) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::FetchCaptureRequest req;
  req.set_file_name(name);
  auto reader = s.stub->FetchCapture(&ctx, req);
  Fetched f;
  v1::CaptureFileChunk c;
  while (reader->Read(&c)) f.chunks.push_back(c);
  f.status = reader->Finish();
  return f;
}

TEST_CASE("a file larger than a chunk arrives whole, in order, in chunks of at most 1 MiB") {
  Server s;
  std::string bytes(2 * CaptureFileStream::kChunkBytes + 12'345, '\0');
  std::mt19937 rng(3);
  for (char& b : bytes) b = static_cast<char>(rng());
  const Fetched f = Fetch(s, s.Write("trace_rank0_step5.json", bytes));
  REQUIRE(f.status.ok());
  REQUIRE(f.chunks.size() == 3);
  std::string got;
  for (const v1::CaptureFileChunk& c : f.chunks) {
    CHECK(c.offset() == got.size());
    CHECK(c.file_bytes() == bytes.size());
    CHECK(c.data().size() <= CaptureFileStream::kChunkBytes);
    got += c.data();
  }
  CHECK(got == bytes);
}

TEST_CASE("an empty file arrives as one empty chunk") {
  Server s;
  const Fetched f = Fetch(s, s.Write("trace_rank1_step5.json", ""));
  REQUIRE(f.status.ok());
  REQUIRE(f.chunks.size() == 1);
  CHECK(f.chunks[0].data().empty());
  CHECK(f.chunks[0].file_bytes() == 0);
}

TEST_CASE("a missing file or a directory is NOT_FOUND with the caller's message") {
  Server s;
  Fetched f = Fetch(s, "trace_rank2_step5.json");
  CHECK(f.chunks.empty());
  CHECK(f.status.error_code() == grpc::NOT_FOUND);
  CHECK(f.status.error_message() == "no capture file trace_rank2_step5.json");
  f = Fetch(s, ".");
  CHECK(f.status.error_code() == grpc::NOT_FOUND);
}

TEST_CASE("a client that leaves mid-file ends the stream; the server goes on serving") {
  Server s;
  const std::string name =
      s.Write("trace_rank3_step5.json", std::string(8 * CaptureFileStream::kChunkBytes, 'x'));
  {
    grpc::ClientContext ctx;
    v1::FetchCaptureRequest req;
    req.set_file_name(name);
    auto reader = s.stub->FetchCapture(&ctx, req);
    v1::CaptureFileChunk c;
    REQUIRE(reader->Read(&c));
    ctx.TryCancel();
    while (reader->Read(&c)) {
    }
    CHECK(reader->Finish().error_code() == grpc::CANCELLED);
  }
  const Fetched f = Fetch(s, name);
  CHECK(f.status.ok());
  CHECK(f.chunks.size() == 8);
}

}  // namespace
}  // namespace stagefrontier
