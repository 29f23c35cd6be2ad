// A hostile (or broken) ingest client, for the end-to-end test of a coordinator serving other
// jobs: each mode does one thing an adversarial user could do, and says on stdout what the
// coordinator answered. Exit 0 when the coordinator refused it the way it should, 1 otherwise.
//
//   hostile_client ADDR huge-world     declares a job with a world size of 2^20 - 1
//   hostile_client ADDR never-read     floods batches and never reads an acknowledgement
//   hostile_client ADDR poison-step    sends a step number past 2^40, then good steps
//   hostile_client ADDR garbage        sends bytes that are not a SidecarMessage
//   hostile_client ADDR silent         opens a stream and never says Hello
//   hostile_client ADDR forged-name    declares a job whose id holds a newline and a NUL
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "daemon/wire/packed_steps.h"
#include "daemon/wire/rank_steps.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "stagefrontier/v1/ingest.grpc.pb.h"

namespace {

using namespace stagefrontier;

v1::SidecarMessage Hello(const std::string& node = "hostile") {
  v1::SidecarMessage m;
  m.mutable_hello()->set_protocol_version(v1::PROTOCOL_VERSION_1);
  m.mutable_hello()->set_node(node);
  m.mutable_hello()->set_sidecar_id("hostile/1");
  return m;
}

void Declare(v1::StepBatch* b, const std::string& job, int rank, int world) {
  v1::RankDeclaration* d = b->add_declarations();
  d->set_job(job);
  d->set_rank(rank);
  d->set_world_size(world);
  for (const char* name : {"data", "grad_sync"}) {
    v1::Stage* s = d->add_stages();
    s->set_name(name);
    s->set_kind(std::string(name) == "data" ? v1::STAGE_KIND_IO : v1::STAGE_KIND_SYNC);
  }
}

void Steps(v1::StepBatch* b, const std::string& job, int rank, int64_t first, int64_t last) {
  wire::PackedStepsEncoder e(2);
  const int64_t d[] = {1'000'000, 2'000'000};
  for (int64_t s = first; s <= last; ++s) e.Add(s, d, 0);
  *b->add_steps() = wire::MakeRankSteps(job, rank, e);
}

// Sends `batch` and returns its acknowledgement (false if the stream ended first).
bool Exchange(grpc::ClientReaderWriter<v1::SidecarMessage, v1::CoordinatorMessage>* rw,
              const v1::StepBatch& batch, v1::BatchAck* ack) {
  v1::SidecarMessage m;
  *m.mutable_batch() = batch;
  if (!rw->Write(m)) return false;
  v1::CoordinatorMessage reply;
  while (rw->Read(&reply)) {
    if (reply.has_ack()) {
      *ack = reply.ack();
      return true;
    }
  }
  return false;
}

int Typed(const std::shared_ptr<grpc::Channel>& channel, const std::string& mode) {
  auto stub = v1::Ingest::NewStub(channel);
  grpc::ClientContext ctx;
  auto rw = stub->Stream(&ctx);
  if (mode == "silent") {
    v1::CoordinatorMessage m;
    while (rw->Read(&m)) {
    }
    const grpc::Status st = rw->Finish();
    std::printf("silent: %d %s\n", st.error_code(), st.error_message().c_str());
    return st.error_code() == grpc::DEADLINE_EXCEEDED ? 0 : 1;
  }
  // escape-node: a node name that would set the terminal's title and clear its screen where
  // sfctl shows it (sfctl health).
  if (!rw->Write(mode == "escape-node" ? Hello("evil\x1b]0;owned\x07\x1b[2J") : Hello())) return 1;
  v1::StepBatch b;
  v1::BatchAck ack;
  if (mode == "escape-node") {
    b.set_batch_seq(1);
    Declare(&b, "hostile-esc", 0, 1);
    Steps(&b, "hostile-esc", 0, 0, 9);
    if (!Exchange(rw.get(), b, &ack) || ack.accepted() != 10) return 1;
    std::printf("escape-node: 10 steps accepted\n");
    rw->WritesDone();
    return rw->Finish().ok() ? 0 : 1;
  }
  if (mode == "huge-world") {
    b.set_batch_seq(1);
    Declare(&b, "hostile-huge", 0, (1 << 20) - 1);
    Steps(&b, "hostile-huge", 0, 0, 99);
    if (!Exchange(rw.get(), b, &ack) || ack.rejections_size() == 0) return 1;
    std::printf("huge-world: refused: %s\n", ack.rejections(0).message().c_str());
    rw->WritesDone();
    return ack.rejections(0).code() == 8 /* RESOURCE_EXHAUSTED */ && rw->Finish().ok() ? 0 : 1;
  }
  if (mode == "forged-name") {
    b.set_batch_seq(1);
    static const char kForged[] = "x\n[2026-11-23 00:00:00] [error] forged\0z";
    Declare(&b, std::string(kForged, sizeof(kForged) - 1), 0, 1);
    if (!Exchange(rw.get(), b, &ack) || ack.rejections_size() == 0) return 1;
    std::printf("forged-name: refused: %s\n", ack.rejections(0).message().c_str());
    rw->WritesDone();
    const std::string& msg = ack.rejections(0).message();
    return msg.find('\n') == std::string::npos && rw->Finish().ok() ? 0 : 1;
  }
  if (mode == "poison-step") {
    b.set_batch_seq(1);
    Declare(&b, "hostile-poison", 0, 1);
    Steps(&b, "hostile-poison", 0, 0, 9);
    if (!Exchange(rw.get(), b, &ack) || ack.accepted() != 10) return 1;
    v1::StepBatch poison;
    poison.set_batch_seq(2);
    Steps(&poison, "hostile-poison", 0, int64_t{1} << 41, int64_t{1} << 41);
    if (!Exchange(rw.get(), poison, &ack) || ack.rejections_size() != 1) return 1;
    std::printf("poison-step: refused: %s\n", ack.rejections(0).message().c_str());
    v1::StepBatch after;
    after.set_batch_seq(3);
    Steps(&after, "hostile-poison", 0, 10, 19);
    if (!Exchange(rw.get(), after, &ack) || ack.accepted() != 10) return 1;
    std::printf("poison-step: the next 10 steps were accepted\n");
    rw->WritesDone();
    return rw->Finish().ok() ? 0 : 1;
  }
  if (mode == "never-read") {
    b.set_batch_seq(1);
    Declare(&b, "hostile-slow", 0, 1);
    if (!Exchange(rw.get(), b, &ack)) return 1;
    // From here on: write, never read. Each batch also names 50 undeclared ranks, so that
    // its acknowledgement (50 refusals) is large and the unread window fills fast.
    int sent = 0;
    for (int64_t s = 0; s < 1'000'000; ++s) {
      v1::SidecarMessage m;
      m.mutable_batch()->set_batch_seq(s + 2);
      Steps(m.mutable_batch(), "hostile-slow", 0, s, s);
      for (int r = 1; r <= 50; ++r) Steps(m.mutable_batch(), "hostile-slow", r, s, s);
      if (!rw->Write(m)) break;
      ++sent;
    }
    ctx.TryCancel();
    const grpc::Status st = rw->Finish();
    std::printf("never-read: cut off after %d batches: %d %s\n", sent, st.error_code(),
                st.error_message().c_str());
    return sent < 1'000'000 ? 0 : 1;
  }
  return 2;
}

int Garbage(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(&ctx, "/stagefrontier.v1.Ingest/Stream", &cq);
  void* tag = nullptr;
  bool ok = false;
  call->StartCall(reinterpret_cast<void*>(1));
  cq.Next(&tag, &ok);
  auto write = [&](const std::string& bytes) {
    grpc::Slice slice(bytes);
    grpc::ByteBuffer buf(&slice, 1);
    call->Write(buf, reinterpret_cast<void*>(2));
    cq.Next(&tag, &ok);
  };
  write(Hello().SerializeAsString());
  // The StreamLimits the Hello earns (a client's Finish waits until what it was sent is read).
  grpc::ByteBuffer limits;
  call->Read(&limits, reinterpret_cast<void*>(4));
  cq.Next(&tag, &ok);
  static const char kGarbage[] = "\xff\xff\xff\xff\x0f garbage\n[error] forged";
  write(std::string(kGarbage, sizeof(kGarbage) - 1));
  grpc::Status st;
  call->Finish(&st, reinterpret_cast<void*>(3));
  cq.Next(&tag, &ok);
  std::printf("garbage: %d %s\n", st.error_code(), st.error_message().c_str());
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return st.error_code() == grpc::INVALID_ARGUMENT ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s ADDR huge-world|never-read|poison-step|garbage|silent\n",
                 argv[0]);
    return 2;
  }
  const std::string mode = argv[2];
  grpc::ChannelArguments args;
  if (mode == "never-read") {
    // A small receive window: the coordinator's writes to us stall soon.
    args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 4096);
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  }
  auto channel = grpc::CreateCustomChannel(argv[1], grpc::InsecureChannelCredentials(), args);
  return mode == "garbage" ? Garbage(channel) : Typed(channel, mode);
}
