// WatchVerdicts on gRPC's callback API, over a real loopback server: held and live verdicts in
// order across fetch batches, many open watches holding no thread each, cancellation,
// shutdown, and refusals.
#include "daemon/coordinator/verdict_watchers.h"

#include <dirent.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "daemon/common/grpc_security.h"
#include "daemon/coordinator/job_registry.h"
#include "daemon/coordinator/query_service.h"
#include "daemon/wire/packed_steps.h"
#include "daemon/wire/rank_steps.h"
#include "grpcpp/grpcpp.h"
#include "stagefrontier/v1/query.grpc.pb.h"

namespace stagefrontier {
namespace {

constexpr char kToken[] = "s3cret";
constexpr char kJob[] = "w";

// A coordinator's query side with one two-rank job whose window is two steps: every two steps
// ingested make one verdict.
struct Coordinator {
  Coordinator() {
    char dir[] = "/tmp/sf_watch_XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    options.data_dir = dir;
    options.fsync = false;
    options.engine.window_steps = 2;
    options.aligner.deadline_ns = int64_t{1} << 60;  // only complete steps close
    jobs = std::make_unique<JobRegistry>(options, &metrics, std::set<std::string>{});
    for (int r = 0; r < 2; ++r) {
      v1::RankDeclaration d;
      d.set_job(kJob);
      d.set_rank(r);
      d.set_world_size(2);
      for (const char* n : {"data", "sync"}) {
        v1::Stage* s = d.add_stages();
        s->set_name(n);
        s->set_kind(std::string(n) == "data" ? v1::STAGE_KIND_IO : v1::STAGE_KIND_SYNC);
      }
      auto declared = jobs->Declare(d);
      REQUIRE(declared.ok());
      job = *declared;
    }
    query = std::make_unique<QueryService>(jobs.get(), &sessions, &metrics, kToken);
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(query.get());
    server = b.BuildAndStart();
    REQUIRE(port > 0);
    channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                  grpc::InsecureChannelCredentials());
    stub = v1::Query::NewStub(channel);
  }
  ~Coordinator() {
    query->Shutdown();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }

  // Ingests the steps that make `n` more verdicts.
  void MakeVerdicts(int n) {
    for (int i = 0; i < 2 * n; ++i, ++next_step) {
      for (int r = 0; r < 2; ++r) {
        wire::PackedStepsEncoder e(2);
        const int64_t d[] = {1'000'000 + (r == 1 ? 300'000 : 0), 200'000};
        e.Add(next_step, d, 0);
        REQUIRE(job->Ingest(wire::MakeRankSteps(kJob, r, e), "n", 0).ok());
      }
    }
    job->CloseDue(0);
  }

  JobOptions options;
  CoordinatorMetrics metrics;
  SidecarSessions sessions;
  std::unique_ptr<JobRegistry> jobs;
  std::shared_ptr<JobState> job;
  std::unique_ptr<QueryService> query;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Query::Stub> stub;
  int64_t next_step = 0;
};

// One watch read through the client's async API (a completion queue spawns no thread, so the
// test's own threads do not hide the server's).
struct Watch {
  Watch(Coordinator& c, int64_t after_seq, bool held_only = false, const char* job = kJob,
        bool token = true) {
    if (token) AttachToken(&ctx, kToken);
    v1::WatchVerdictsRequest req;
    req.set_job(job);
    req.set_after_seq(after_seq);
    req.set_held_only(held_only);
    reader = c.stub->PrepareAsyncWatchVerdicts(&ctx, req, &cq);
    reader->StartCall(this);
    started = Wait();
  }
  ~Watch() {
    ctx.TryCancel();
    cq.Shutdown();
    void* tag;
    bool ok;
    while (cq.Next(&tag, &ok)) {
    }
  }
  bool Wait(std::chrono::seconds timeout = std::chrono::seconds(10)) {
    void* tag = nullptr;
    bool ok = false;
    const auto status = cq.AsyncNext(&tag, &ok, std::chrono::system_clock::now() + timeout);
    REQUIRE(status == grpc::CompletionQueue::GOT_EVENT);
    return ok;
  }
  // The next verdict's seq, or -1 when the stream ended.
  int64_t Next() {
    v1::VerdictEvent ev;
    reader->Read(&ev, this);
    return Wait() ? ev.seq() : -1;
  }
  grpc::Status End() {
    grpc::Status status;
    reader->Finish(&status, this);
    REQUIRE(Wait());
    return status;
  }

  grpc::ClientContext ctx;
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::ClientAsyncReader<v1::VerdictEvent>> reader;
  bool started = false;
};

int ThreadsNow() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  REQUIRE(d != nullptr);
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

template <typename F>
bool Eventually(F f) {
  for (int i = 0; i < 1000 && !f(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return f();
}

TEST_CASE("held_only sends the held verdicts after after_seq in order, across batches, then ends") {
  Coordinator c;
  constexpr int kVerdicts = 3 * static_cast<int>(VerdictWatchers::kBatch) + 5;
  c.MakeVerdicts(kVerdicts);
  REQUIRE(c.job->VerdictsAfter(0).size() == static_cast<size_t>(kVerdicts));
  for (const int64_t after : {int64_t{0}, int64_t{kVerdicts - 10}, int64_t{kVerdicts}}) {
    Watch w(c, after, /*held_only=*/true);
    REQUIRE(w.started);
    for (int64_t seq = after + 1; seq <= kVerdicts; ++seq) REQUIRE(w.Next() == seq);
    CHECK(w.Next() == -1);
    CHECK(w.End().ok());
  }
  CHECK(c.query->live_watches() == 0);  // held_only watches are never registered
}

TEST_CASE("many live watches hold no thread each and all get every new verdict in order") {
  Coordinator c;
  c.MakeVerdicts(3);
  constexpr int kWatches = 200;
  const int threads_before = ThreadsNow();
  std::vector<std::unique_ptr<Watch>> watches;
  for (int i = 0; i < kWatches; ++i) {
    watches.push_back(std::make_unique<Watch>(c, /*after_seq=*/1));
    REQUIRE(watches.back()->started);
  }
  REQUIRE(Eventually([&] { return c.query->live_watches() == kWatches; }));
  // A synchronous server holds one thread per open stream (+200 here); the callback API's
  // threads do not grow with the watches.
  const int threads_open = ThreadsNow();
  INFO("threads before " << threads_before << ", with " << kWatches << " watches open "
                         << threads_open);
  CHECK(threads_open - threads_before < 40);
  for (auto& w : watches) {  // the held ones after seq 1
    REQUIRE(w->Next() == 2);
    REQUIRE(w->Next() == 3);
  }
  // New verdicts, more than one fetch batch while nobody reads: each watch gets all in order.
  const int more = static_cast<int>(VerdictWatchers::kBatch) + 3;
  c.MakeVerdicts(more);
  for (auto& w : watches) {
    for (int64_t seq = 4; seq <= 3 + more; ++seq) REQUIRE(w->Next() == seq);
  }
  // A verdict made now reaches every watch already waiting.
  c.MakeVerdicts(1);
  for (auto& w : watches) REQUIRE(w->Next() == 4 + more);
}

TEST_CASE("a cancelled watch ends and is forgotten; the others go on") {
  Coordinator c;
  Watch keep(c, 0);
  {
    Watch gone(c, 0);
    REQUIRE(Eventually([&] { return c.query->live_watches() == 2; }));
    gone.ctx.TryCancel();
    CHECK(gone.End().error_code() == grpc::CANCELLED);
  }
  CHECK(Eventually([&] { return c.query->live_watches() == 1; }));
  c.MakeVerdicts(1);
  CHECK(keep.Next() == 1);
}

TEST_CASE("shutdown ends live watches with OK and refuses new ones") {
  Coordinator c;
  c.MakeVerdicts(1);
  Watch w(c, 0);
  REQUIRE(w.Next() == 1);
  REQUIRE(Eventually([&] { return c.query->live_watches() == 1; }));
  c.query->Shutdown();
  CHECK(w.Next() == -1);
  CHECK(w.End().ok());
  CHECK(Eventually([&] { return c.query->live_watches() == 0; }));  // OnDone runs after
  Watch late(c, 0);
  CHECK(late.Next() == -1);
  const grpc::Status s = late.End();
  CHECK(s.error_code() == grpc::UNAVAILABLE);
  CHECK(s.error_message() == "the coordinator is shutting down");
}

TEST_CASE("a watch without the token or of an unknown job is refused") {
  Coordinator c;
  {
    Watch w(c, 0, false, kJob, /*token=*/false);
    CHECK(w.Next() == -1);
    CHECK(w.End().error_code() == grpc::UNAUTHENTICATED);
  }
  {
    Watch w(c, 0, false, "nope");
    CHECK(w.Next() == -1);
    const grpc::Status s = w.End();
    CHECK(s.error_code() == grpc::NOT_FOUND);
    CHECK(s.error_message() == "unknown job \"nope\"");
  }
  CHECK(c.query->live_watches() == 0);  // refused watches are never registered
}

TEST_CASE("jobs ring their bell when they append verdicts; VerdictsAfter pages by seq") {
  Coordinator c;
  VerdictBell* bell = c.jobs->verdict_bell();
  const uint64_t before = bell->rings();
  c.MakeVerdicts(5);
  CHECK(bell->rings() > before);
  CHECK(bell->WaitAfter(before, std::chrono::milliseconds(0)) == bell->rings());
  const std::vector<v1::VerdictEvent> page = c.job->VerdictsAfter(2, 2);
  REQUIRE(page.size() == 2);
  CHECK(page[0].seq() == 3);
  CHECK(page[1].seq() == 4);
  CHECK(c.job->VerdictsAfter(5).empty());
}

}  // namespace
}  // namespace stagefrontier
