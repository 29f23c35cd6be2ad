// Measures the coordinator's ingest end to end through gRPC (a documented harness, not a unit
// test; docs/results.md "Coordinator ingest through gRPC"). It starts a real coordinator, then
// --procs client processes that each hold the streams of --nodes/--procs sidecar-like nodes
// (one HTTP/2 connection and one Ingest stream per node, --ranks-per-node ranks each, gRPC's
// callback API so a process holds thousands of streams; no HTTP/2 bandwidth-delay probing, as
// the sidecar's channel), and reports
//   streams:      how many were held at once, and the coordinator's RSS per idle stream
//                 (Hello and one acknowledged empty batch, no ranks declared);
//   throughput:   rank-steps the coordinator acknowledged per second of wall time and per
//                 second of the coordinator's own CPU time (user + system, /proc/PID/stat);
//   ack latency:  from handing a batch to gRPC to its BatchAck, p50 / p99 / max;
//   verdicts:     from the last node's send of a window's last step to the verdict arriving
//                 over WatchVerdicts, p50 / p99 / max;
//   memory:       the coordinator's RSS with every stream open and the job declared, and at
//                 the end;
//   closing:      the coordinator's CPU time from every stream ending at once (the clients
//                 exit) until it is idle again.
// Every node sends --steps steps in batches of --steps-per-batch steps x its ranks, at most
// --in-flight batches unacknowledged (as the sidecar's window), paced at --step-rate steps/s
// (0: as fast as the acknowledgements allow). One job, world = nodes x ranks-per-node.
// --sidecar-batching replaces --steps-per-batch with the sidecar's own batching (default
// settings: daemon/sidecar/batch_hold.h): each rank of a node finishes step s at
// start + (s + 1) / --step-rate plus 0-2 ms of skew, and the node sends what its ranks finished
// when its BatchHold says so; verdicts are then also timed from the window's last step's end.
// With it, each node also sends its ranks' health as a sidecar with default settings does
// (daemon/sidecar/health_cadence.h: after 4.5 s with nothing sent, a batch counting, and at
// least every 30 s; these ranks never keep a stage open past 1 s and have no news): each rank's
// counters and open stage, the nodes' cadences spread over 2.5 s. --health-every-ms N sends it
// every N ms instead (the sidecar's cadence before session 26 was every 1000 ms; 4000 is about
// as many as before 2026-11-28, one per batch), 0 never.
// Each node's batches end on the steps its name's phase gives (batch_hold.h PhaseSeedFor, as the
// sidecar's --node); --no-batch-phase ends every node's on multiples of K (before session 45).
// --coordinator-arg ARG (repeatable) passes ARG on to the coordinator, for A/B runs of a flag.
//
//   bazel build -c opt //tests/bench:ingest_load_harness
//   //daemon/coordinator:stagefrontier-coordinator bazel-bin/tests/bench/ingest_load_harness
//   COORDINATOR_BIN --nodes 12500 --procs 8 ... (COORDINATOR_BIN:
//   bazel-bin/daemon/coordinator/stagefrontier-coordinator)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "daemon/common/descriptor_limit.h"
#include "daemon/sidecar/batch_hold.h"
#include "daemon/sidecar/health_cadence.h"
#include "daemon/wire/packed_steps.h"
#include "grpcpp/grpcpp.h"
#include "shm/monotonic_clock.h"
#include "stagefrontier/v1/ingest.grpc.pb.h"
#include "stagefrontier/v1/query.grpc.pb.h"
#include "tests/bench/bench_processes.h"
#include "tests/bench/bench_workload.h"

namespace {

using namespace stagefrontier;
using bench::CpuSeconds;
using bench::RssBytes;
using bench::Spawn;

constexpr uint32_t kStages = bench::kBenchStages;
constexpr int kMaxSteps = 1 << 16;
constexpr char kJob[] = "load";

struct Options {
  std::string coordinator;
  int nodes = 1000;
  int ranks_per_node = 8;
  int procs = 4;
  int steps = 200;
  int steps_per_batch = 4;
  int in_flight = 4;
  double step_rate = 0;  // steps/s per node; 0: as fast as acks allow
  int window = 100;
  bool sidecar_batching = false;  // the sidecar's own batching instead of steps_per_batch
  int health_every_ms = -1;       // with sidecar_batching: -1 the sidecar's cadence, N every N ms
  bool batch_phase = true;        // with sidecar_batching: the node's phase, as the sidecar's
  bool fsync = false;
  int port = 17491;
  std::string data_dir;                       // default: a temporary directory on /tmp
  std::vector<std::string> coordinator_args;  // --coordinator-arg, in order
};

// Shared between the harness and its client processes (MAP_SHARED, set up before fork).
struct Shared {
  std::atomic<int> phase;                   // 0 open, 1 declare, 2 send, 3 quit
  std::atomic<int> opened;                  // streams whose empty first batch was acknowledged
  std::atomic<int> declared;                // streams whose declarations were acknowledged
  std::atomic<int> finished;                // streams whose last batch was acknowledged
  std::atomic<int> failed;                  // streams that ended with an error
  std::atomic<int64_t> accepted;            // rank-steps acknowledged as accepted
  std::atomic<int64_t> late;                // ... as late (for steps already closed)
  std::atomic<int64_t> rejected;            // rank-steps in rejections
  std::atomic<int64_t> duplicates;          // ... as already received (another stream's ranks)
  std::atomic<int64_t> batches;             // step batches acknowledged
  std::atomic<int64_t> health;              // health messages queued (sidecar batching)
  std::atomic<int64_t> health_riding;       // health that rode a batch (StepBatch.health)
  std::atomic<int64_t> send_start_ns;       // when step 0 starts (set before phase 2)
  std::atomic<int64_t> sent_ns[kMaxSteps];  // latest hand-off of step s by any node
};

void FetchMax(std::atomic<int64_t>& a, int64_t v) {
  int64_t cur = a.load(std::memory_order_relaxed);
  while (cur < v && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

void SleepMs(double ms) {
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
}

bool PortAnswers(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(fd);
  return ok;
}

// Waits until `done()` or `seconds` pass; false on timeout.
template <typename F>
bool WaitFor(F done, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    SleepMs(5);
  }
  return true;
}

// ---- client side (one process, many nodes) ----

class NodeStream final
    : public grpc::ClientBidiReactor<v1::SidecarMessage, v1::CoordinatorMessage> {
 public:
  // packed[c - 1]: variants of c steps' packed durations. `next_due_ns`: this stream's slot in
  // its process's array of due times (see RunClients).
  NodeStream(const Options& o, Shared* shared, int node,
             const std::vector<std::vector<std::string>>* packed, std::vector<double>* latencies_ms,
             std::mutex* lat_mu, std::atomic<int64_t>* next_due_ns)
      : o_(o),
        shared_(shared),
        node_(node),
        packed_(packed),
        batches_(o.sidecar_batching ? INT_MAX : o.steps / o.steps_per_batch),
        latencies_ms_(latencies_ms),
        lat_mu_(lat_mu),
        next_due_ns_(next_due_ns) {
    done_.assign(static_cast<size_t>(o.ranks_per_node), -1);
    sent_.assign(static_cast<size_t>(o.ranks_per_node), -1);
  }

  std::string NodeName() const { return "load-node-" + std::to_string(node_); }

  void Open(v1::Ingest::Stub* stub) {
    stub->async()->Stream(&ctx_, this);
    StartRead(&in_);
    v1::SidecarMessage hello;
    hello.mutable_hello()->set_protocol_version(v1::PROTOCOL_VERSION_1);
    hello.mutable_hello()->set_node(NodeName());
    hello.mutable_hello()->set_sidecar_id("load-" + std::to_string(node_));
    Queue(std::move(hello));
    v1::SidecarMessage empty;
    empty.mutable_batch()->set_batch_seq(1);
    Queue(std::move(empty));
    StartCall();
  }

  // Sends what phase and pacing allow. Thread-safe.
  void Pump(int phase, int64_t now_ns, int64_t send_start_ns) {
    // Cheap when nothing is due (thousands of streams per process share two cores with the
    // coordinator): no lock until the pacing allows the next batch.
    if (phase >= 2 && now_ns < next_due_ns_->load(std::memory_order_relaxed)) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) return;
    if (phase >= 1 && !declare_sent_ && opened_) {
      declare_sent_ = true;
      v1::SidecarMessage m;
      m.mutable_batch()->set_batch_seq(2);
      for (int r = 0; r < o_.ranks_per_node; ++r) {
        *m.mutable_batch()->add_declarations() = bench::SixStageDeclaration(
            kJob, node_ * o_.ranks_per_node + r, o_.nodes * o_.ranks_per_node, r);
      }
      QueueLocked(std::move(m), now_ns);
    }
    if (phase < 2 || !declared_) return;
    if (o_.sidecar_batching) {
      PumpAsSidecarLocked(now_ns, send_start_ns);
      return;
    }
    while (next_ < batches_ && next_ - acked_ < o_.in_flight) {
      const int64_t first_step = static_cast<int64_t>(next_) * o_.steps_per_batch;
      if (o_.step_rate > 0) {
        const int64_t due = send_start_ns + static_cast<int64_t>(first_step / o_.step_rate * 1e9);
        next_due_ns_->store(due, std::memory_order_relaxed);
        if (now_ns < due) break;
      }
      v1::SidecarMessage m;
      v1::StepBatch* b = m.mutable_batch();
      b->set_batch_seq(3 + static_cast<uint64_t>(next_));
      for (int r = 0; r < o_.ranks_per_node; ++r) {
        v1::RankSteps* rs = b->add_steps();
        rs->set_job(kJob);
        rs->set_rank(node_ * o_.ranks_per_node + r);
        rs->set_base_step(first_step);
        rs->set_count(static_cast<uint32_t>(o_.steps_per_batch));
        rs->set_packed(Packed(o_.steps_per_batch, next_, r));
      }
      QueueLocked(std::move(m), now_ns);
      for (int s = 0; s < o_.steps_per_batch; ++s)
        FetchMax(shared_->sent_ns[first_step + s], now_ns);
      ++next_;
    }
  }

 private:
  const std::string& Packed(int count, int batch, int r) const {
    const std::vector<std::string>& v = (*packed_)[static_cast<size_t>(count - 1)];
    return v[(static_cast<size_t>(node_ + batch) * 7 + static_cast<size_t>(r)) % v.size()];
  }

  // Rank r of this node finishes step s at start + (s + 1) / rate + a skew of 0-2 ms.
  int64_t StepEndNs(int64_t send_start_ns, int64_t step, int r) const {
    const uint64_t h = (static_cast<uint64_t>(node_) * 1000003u + static_cast<uint64_t>(r) * 7919u +
                        static_cast<uint64_t>(step) * 104729u) %
                       2'000'003u;
    return send_start_ns + static_cast<int64_t>((step + 1) / o_.step_rate * 1e9) +
           static_cast<int64_t>(h);
  }

  // As a sidecar with default settings: notes each step its ranks finished, sends what they
  // finished when the node's BatchHold says so (and the in-flight bound allows).
  void PumpAsSidecarLocked(int64_t now_ns, int64_t send_start_ns) {
    const int64_t health_ns = static_cast<int64_t>(o_.health_every_ms) * 1'000'000;
    const bool cadence = o_.health_every_ms < 0;
    if (cadence && !cadence_started_) {
      cadence_.Start(send_start_ns + static_cast<int64_t>(node_ % 997) * 2'500'000'000 / 997);
      cadence_started_ = true;
    }
    if (health_ns > 0 && next_health_ns_ == 0) {
      next_health_ns_ = send_start_ns + static_cast<int64_t>(node_ % 997) * health_ns / 997;
    }
    if (cadence ? cadence_.Due(now_ns, false) : health_ns > 0 && now_ns >= next_health_ns_) {
      QueueLocked(HealthMessage(now_ns), now_ns);
      shared_->health.fetch_add(1, std::memory_order_relaxed);
      if (cadence) {
        cadence_.Sent(now_ns, /*health=*/true);
      } else {
        next_health_ns_ += health_ns;
      }
    }
    int64_t next_end = INT64_MAX;
    for (int r = 0; r < o_.ranks_per_node; ++r) {
      int64_t& done = done_[static_cast<size_t>(r)];
      while (done + 1 < o_.steps && StepEndNs(send_start_ns, done + 1, r) <= now_ns) {
        ++done;
        hold_.Note(kJob, node_ * o_.ranks_per_node + r, done, now_ns);
        if (oldest_ns_ == 0) oldest_ns_ = now_ns;
      }
      if (done + 1 < o_.steps) next_end = std::min(next_end, StepEndNs(send_start_ns, done + 1, r));
    }
    const bool all_done = next_end == INT64_MAX;
    if (oldest_ns_ != 0 && next_ - acked_ < o_.in_flight &&
        (all_done || hold_.Due(now_ns, oldest_ns_))) {
      v1::SidecarMessage m;
      v1::StepBatch* b = m.mutable_batch();
      b->set_batch_seq(3 + static_cast<uint64_t>(next_));
      for (int r = 0; r < o_.ranks_per_node; ++r) {
        const int64_t from = sent_[static_cast<size_t>(r)] + 1;
        const int64_t to = done_[static_cast<size_t>(r)];
        if (to < from) continue;
        v1::RankSteps* rs = b->add_steps();
        rs->set_job(kJob);
        rs->set_rank(node_ * o_.ranks_per_node + r);
        rs->set_base_step(from);
        rs->set_count(static_cast<uint32_t>(to - from + 1));
        rs->set_packed(Packed(static_cast<int>(to - from + 1), next_, r));
        for (int64_t st = from; st <= to; ++st) FetchMax(shared_->sent_ns[st], now_ns);
        sent_[static_cast<size_t>(r)] = to;
      }
      // As a sidecar does (ingest_streamer.cc SendPendingIfDue): health due before the next
      // batch rides this one, to a coordinator that reads it.
      if (cadence && batch_health_ && cadence_.RidesBatch(now_ns, hold_.HoldNs(), false)) {
        *b->mutable_health() = std::move(*HealthMessage(now_ns).mutable_health());
        cadence_.Sent(now_ns, /*health=*/true);
        shared_->health_riding.fetch_add(1, std::memory_order_relaxed);
      }
      QueueLocked(std::move(m), now_ns);
      hold_.Sent(now_ns);
      cadence_.Sent(now_ns, /*health=*/false);
      oldest_ns_ = 0;
      ++next_;
      if (all_done) batches_ = next_;  // the last batch: finished once it is acknowledged
    }
    if (all_done && oldest_ns_ == 0 && batches_ == INT_MAX) {
      // Everything went out with a batch that ended on a step boundary.
      batches_ = next_;
      if (acked_ == batches_) shared_->finished.fetch_add(1);
    }
    // Nothing to do before the next step ends or the hold runs out (a sidecar's poll would find
    // nothing either): thousands of streams per client process must not spin while they hold.
    int64_t next = next_end;
    if (oldest_ns_ != 0) {
      next = next_ - acked_ < o_.in_flight ? std::min(next, oldest_ns_ + hold_.HoldNs()) : now_ns;
    }
    if (health_ns > 0 && batches_ == INT_MAX) next = std::min(next, next_health_ns_);
    if (cadence && batches_ == INT_MAX) next = std::min(next, cadence_.NextNs(false));
    next_due_ns_->store(next, std::memory_order_relaxed);
  }

  // Each rank's health as the sidecar sends it (segment_drainer.cc FillHealth): counters and
  // the open stage of the step after the last one it finished.
  v1::SidecarMessage HealthMessage(int64_t now_ns) const {
    v1::SidecarMessage m;
    for (int r = 0; r < o_.ranks_per_node; ++r) {
      v1::SlotHealth* h = m.mutable_health()->add_slots();
      const int64_t done = done_[static_cast<size_t>(r)];
      h->set_job(kJob);
      h->set_rank(node_ * o_.ranks_per_node + r);
      h->set_local_rank(r);
      h->set_owner_pid(static_cast<uint32_t>(10000 + r));
      h->set_owner("alive");
      h->set_records_read(static_cast<uint64_t>(done + 1));
      h->set_open_known(true);
      h->set_open_step(done + 1);
      h->set_open_stage("data");
      h->set_open_age_ns(now_ns % 1'000'000);
      h->set_layout_source("none");
    }
    return m;
  }

  void Queue(v1::SidecarMessage m) {
    std::lock_guard<std::mutex> lock(mu_);
    QueueLocked(std::move(m), shm::MonotonicNowNs());
  }
  void QueueLocked(v1::SidecarMessage m, int64_t now_ns) {
    if (m.has_batch()) sent_at_[m.batch().batch_seq()] = now_ns;
    out_.push_back(std::move(m));
    if (!writing_) {
      writing_ = true;
      StartWrite(&out_.front());
    }
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    out_.pop_front();
    writing_ = false;
    if (!ok) return;  // OnDone follows
    if (!out_.empty()) {
      writing_ = true;
      StartWrite(&out_.front());
    }
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    const int64_t now = shm::MonotonicNowNs();
    if (in_.has_limits()) {
      // As a sidecar does (ingest_streamer.cc OnLimits): its cadence and batching inside them.
      std::lock_guard<std::mutex> lock(mu_);
      cadence_.set_options(CadenceFor({}, &in_.limits()));
      // The phase as the sidecar takes it from its --node (sidecar_options.cc).
      hold_.set_options(
          HoldFor({.phase_seed = o_.batch_phase ? PhaseSeedFor(NodeName()) : 0}, &in_.limits()));
      batch_health_ = in_.limits().batch_health();
    }
    if (in_.has_ack()) {
      const v1::BatchAck& a = in_.ack();
      std::lock_guard<std::mutex> lock(mu_);
      auto it = sent_at_.find(a.batch_seq());
      if (it != sent_at_.end()) {
        const double ms = (now - it->second) / 1e6;
        sent_at_.erase(it);
        if (a.batch_seq() >= 3) {
          std::lock_guard<std::mutex> l2(*lat_mu_);
          latencies_ms_->push_back(ms);
        }
      }
      int64_t rejected = 0;
      for (const auto& r : a.rejections()) rejected += r.records();
      if (rejected > 0) shared_->rejected.fetch_add(rejected);
      if (a.batch_seq() == 1) {
        opened_ = true;
        shared_->opened.fetch_add(1);
      } else if (a.batch_seq() == 2) {
        declared_ = true;
        shared_->declared.fetch_add(1);
      } else {
        shared_->accepted.fetch_add(a.accepted());
        shared_->late.fetch_add(a.late());
        shared_->duplicates.fetch_add(a.duplicates());
        shared_->batches.fetch_add(1);
        if (++acked_ == batches_) shared_->finished.fetch_add(1);
      }
    }
    StartRead(&in_);
  }

  void OnDone(const grpc::Status& s) override {
    std::lock_guard<std::mutex> lock(mu_);
    ended_ = true;
    if (!s.ok() && shared_->phase.load() < 3) {
      if (shared_->failed.fetch_add(1) < 3) {
        std::fprintf(stderr, "node %d: stream ended: %d %s\n", node_, s.error_code(),
                     s.error_message().c_str());
      }
    }
  }

  const Options& o_;
  Shared* shared_;
  const int node_;
  const std::vector<std::vector<std::string>>* packed_;
  int batches_;  // with sidecar batching: INT_MAX until the last batch went out
  std::vector<double>* latencies_ms_;
  std::mutex* lat_mu_;
  grpc::ClientContext ctx_;
  v1::CoordinatorMessage in_;
  std::mutex mu_;
  std::deque<v1::SidecarMessage> out_;
  std::map<uint64_t, int64_t> sent_at_;
  std::atomic<int64_t>* const next_due_ns_;  // when Pump next has work (ns)
  int64_t next_health_ns_ = 0;  // with sidecar batching: when the node's next health goes
  HealthCadence cadence_;       // with sidecar batching and --health-every-ms unset
  bool batch_health_ = false;   // the coordinator reads StepBatch.health (its StreamLimits)
  bool cadence_started_ = false;
  bool writing_ = false;
  bool opened_ = false;
  bool declare_sent_ = false;
  bool declared_ = false;
  bool ended_ = false;
  int next_ = 0;
  int acked_ = 0;
  // Sidecar batching: each rank's newest finished and sent step, the node's hold.
  std::vector<int64_t> done_;
  std::vector<int64_t> sent_;
  BatchHold hold_;
  int64_t oldest_ns_ = 0;  // when the oldest unsent step was noted; 0: none
};

int RunClients(const Options& o, Shared* shared, int proc, const std::string& lat_path) {
  // Pre-encoded packed steps: packed[c - 1] holds variants of steps 0..c-1 relative to base 0,
  // reused with any base step (c: a batch's steps per rank).
  const int max_count = o.sidecar_batching ? 64 : o.steps_per_batch;
  std::vector<std::vector<std::string>> packed(static_cast<size_t>(max_count));
  std::mt19937 rng(static_cast<uint32_t>(proc) + 1);
  std::uniform_int_distribution<int> jitter(-200'000, 200'000);
  for (int c = 1; c <= max_count; ++c) {
    if (!o.sidecar_batching && c != o.steps_per_batch) continue;
    for (int v = 0; v < 61; ++v) {
      wire::PackedStepsEncoder e(kStages);
      for (int s = 0; s < c; ++s) {
        const int64_t d[kStages] = {4'000'000 + jitter(rng),  8'000'000 + jitter(rng),
                                    12'000'000 + jitter(rng), 300'000 + jitter(rng) / 10,
                                    3'000'000 + jitter(rng),  100'000};
        e.Add(s, d, 0);
      }
      packed[static_cast<size_t>(c - 1)].push_back(e.bytes());
    }
  }
  const std::string addr = "127.0.0.1:" + std::to_string(o.port);
  // Every stream's next due time side by side: the sweep below reads 8 bytes per stream from
  // one array, not a cache line from each stream's object (that load was 88% of this loop's
  // time and about 13% of the clients' CPU: their cost on the coordinator's two cores).
  const int count = (o.nodes - proc + o.procs - 1) / o.procs;
  std::unique_ptr<std::atomic<int64_t>[]> due(new std::atomic<int64_t>[count]);  // before streams
  for (int i = 0; i < count; ++i) due[i].store(0, std::memory_order_relaxed);
  std::vector<std::unique_ptr<v1::Ingest::Stub>> stubs;
  std::vector<std::unique_ptr<NodeStream>> streams;
  std::vector<double> latencies_ms;
  std::mutex lat_mu;
  for (int n = proc; n < o.nodes; n += o.procs) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one connection per node
    args.SetMaxReceiveMessageSize(-1);
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);  // as the sidecar's channel (coordinator_channel.cc)
    stubs.push_back(v1::Ingest::NewStub(
        grpc::CreateCustomChannel(addr, grpc::InsecureChannelCredentials(), args)));
    streams.push_back(std::make_unique<NodeStream>(o, shared, n, &packed, &latencies_ms, &lat_mu,
                                                   &due[streams.size()]));
    streams.back()->Open(stubs.back().get());
  }
  for (;;) {
    const int phase = shared->phase.load();
    if (phase >= 3) break;
    const int64_t now = shm::MonotonicNowNs();
    const int64_t send_start = shared->send_start_ns.load();
    for (size_t i = 0; i < streams.size(); ++i) {
      if (phase >= 2 && now < due[i].load(std::memory_order_relaxed)) continue;
      streams[i]->Pump(phase, now, send_start);
    }
    SleepMs(phase < 2 ? 20 : o.step_rate > 0 ? 5 : 2);
  }
  {
    std::lock_guard<std::mutex> lock(lat_mu);
    std::ofstream out(lat_path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(latencies_ms.data()),
              static_cast<std::streamsize>(latencies_ms.size() * sizeof(double)));
  }
  std::fflush(stderr);
  _exit(0);  // the coordinator sees the connections close; no orderly shutdown needed
}

double Pct(const std::vector<double>& v, double p) {
  if (v.empty()) return -1;
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

int Usage(const char* argv0) {
  std::fprintf(
      stderr,
      "usage: %s COORDINATOR_BIN [--nodes N] [--ranks-per-node N] [--procs N] "
      "[--steps N] [--steps-per-batch N | --sidecar-batching [--no-batch-phase]] [--in-flight N] "
      "[--step-rate STEPS_PER_S] [--health-every-ms N] "
      "[--window N] [--fsync] [--port P] [--data-dir DIR] [--coordinator-arg ARG]...\n",
      argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage(argv[0]);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // phases show as they end, also into a file
  Options o;
  o.coordinator = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--fsync") {
      o.fsync = true;
      continue;
    }
    if (k == "--sidecar-batching") {
      o.sidecar_batching = true;
      continue;
    }
    if (k == "--no-batch-phase") {  // every node's batches end on multiples of K (A/B runs)
      o.batch_phase = false;
      continue;
    }
    if (i + 1 >= argc) return Usage(argv[0]);
    const char* v = argv[++i];
    if (k == "--nodes")
      o.nodes = std::atoi(v);
    else if (k == "--ranks-per-node")
      o.ranks_per_node = std::atoi(v);
    else if (k == "--procs")
      o.procs = std::atoi(v);
    else if (k == "--steps")
      o.steps = std::atoi(v);
    else if (k == "--steps-per-batch")
      o.steps_per_batch = std::atoi(v);
    else if (k == "--in-flight")
      o.in_flight = std::atoi(v);
    else if (k == "--step-rate")
      o.step_rate = std::atof(v);
    else if (k == "--window")
      o.window = std::atoi(v);
    else if (k == "--health-every-ms")
      o.health_every_ms = std::atoi(v);
    else if (k == "--port")
      o.port = std::atoi(v);
    else if (k == "--data-dir")
      o.data_dir = v;
    else if (k == "--coordinator-arg")  // passed on, e.g. --journal-compact-mb 0 (A/B runs)
      o.coordinator_args.push_back(v);
    else
      return Usage(argv[0]);
  }
  if (o.nodes < 1 || o.ranks_per_node < 1 || o.procs < 1 || o.steps_per_batch < 1 ||
      o.steps < o.steps_per_batch || o.steps >= kMaxSteps || o.in_flight < 1) {
    std::fprintf(stderr,
                 "bad options: need nodes, ranks, procs, steps-per-batch, in-flight >= 1 "
                 "and steps-per-batch <= steps < 65536\n");
    return 2;
  }
  if (o.sidecar_batching && o.step_rate <= 0) {
    std::fprintf(stderr, "--sidecar-batching needs --step-rate (ranks finish steps in time)\n");
    return 2;
  }
  if (o.sidecar_batching) o.steps_per_batch = 1;  // unused: the hold decides
  o.steps -= o.steps % o.steps_per_batch;
  // Every stream is a socket on both sides (the client processes inherit this limit).
  const uint64_t wanted = static_cast<uint64_t>(o.nodes) + 256;
  absl::StatusOr<uint64_t> nofile = RaiseDescriptorLimit(wanted);
  if (!nofile.ok() || *nofile < wanted) {
    std::fprintf(stderr, "%d streams need more descriptors than this process may open (%s)\n",
                 o.nodes,
                 nofile.ok() ? std::to_string(*nofile).c_str()
                             : std::string(nofile.status().message()).c_str());
    return 2;
  }

  // A coordinator already on the port (another harness run) would take this run's clients: its
  // own coordinator could not bind and exits, and both runs' figures are wrong together.
  if (PortAnswers(o.port)) {
    std::fprintf(stderr,
                 "port %d already answers: another coordinator (another harness run?) listens "
                 "there; stop it or pass --port\n",
                 o.port);
    return 2;
  }
  char tmpl[] = "/tmp/sf_load_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string data = o.data_dir.empty() ? dir + "/data" : o.data_dir;
  std::vector<std::string> cargs = {o.coordinator,
                                    "--listen",
                                    "127.0.0.1:" + std::to_string(o.port),
                                    "--metrics-listen",
                                    "",
                                    "--data-dir",
                                    data,
                                    "--window-steps",
                                    std::to_string(o.window),
                                    "--max-streams",
                                    std::to_string(o.nodes + 16)};
  if (!o.fsync) cargs.push_back("--no-fsync");
  cargs.insert(cargs.end(), o.coordinator_args.begin(), o.coordinator_args.end());
  const pid_t coord = Spawn(cargs, dir + "/coordinator.log");
  // No gRPC in this process before the clients fork (gRPC does not survive fork).
  bool exited = false;  // reaped: later waitpid calls on it would fail, not say so again
  const auto coordinator_exited = [&] {
    return exited = exited || waitpid(coord, nullptr, WNOHANG) == coord;
  };
  if (!WaitFor([&] { return coordinator_exited() || PortAnswers(o.port); }, 30) ||
      coordinator_exited()) {
    std::fprintf(stderr, "the coordinator did not listen; see %s/coordinator.log\n", dir.c_str());
    kill(coord, SIGKILL);
    return 1;
  }
  SleepMs(300);
  auto* shared = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  new (shared) Shared{};
  const int64_t rss_start = RssBytes(coord);
  const auto t_open = std::chrono::steady_clock::now();
  std::vector<pid_t> clients;
  for (int p = 0; p < o.procs; ++p) {
    const pid_t pid = fork();
    if (pid == 0) return RunClients(o, shared, p, dir + "/lat." + std::to_string(p));
    clients.push_back(pid);
  }
  const auto elapsed = [](auto t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  bool ok = WaitFor([&] { return shared->opened.load() + shared->failed.load() >= o.nodes; }, 600);
  const double open_s = elapsed(t_open);
  SleepMs(1000);
  const int64_t rss_open = RssBytes(coord);
  const int held = shared->opened.load();
  std::printf(
      "ingest_load_harness: %d nodes x %d ranks = %d ranks, %d client processes, "
      "%d steps in batches of %s, in flight %d, rate %s, window %d, fsync %s%s\n",
      o.nodes, o.ranks_per_node, o.nodes * o.ranks_per_node, o.procs, o.steps,
      !o.sidecar_batching ? std::to_string(o.steps_per_batch).c_str()
      : o.batch_phase     ? "the sidecar's own batching (default settings)"
                          : "the sidecar's own batching, every node on multiples of K "
                            "(--no-batch-phase)",
      o.in_flight,
      o.step_rate > 0 ? (std::to_string(o.step_rate) + " steps/s per node").c_str()
                      : "as fast as acks allow",
      o.window, o.fsync ? "on" : "off",
      !o.sidecar_batching || o.health_every_ms == 0 ? ""
      : o.health_every_ms < 0
          ? ", health as the sidecar's (inside the coordinator's StreamLimits: health_cadence.h)"
          : (", health every " + std::to_string(o.health_every_ms) + " ms").c_str());
  std::printf(
      "streams held: %d of %d opened in %.1f s (failed %d); coordinator RSS %.1f MB -> "
      "%.1f MB: %.1f KB per idle stream\n",
      held, o.nodes, open_s, shared->failed.load(), rss_start / 1e6, rss_open / 1e6,
      held > 0 ? (rss_open - rss_start) / 1024.0 / held : -1.0);

  shared->phase.store(1);
  ok = ok &&
       WaitFor([&] { return shared->declared.load() + shared->failed.load() >= o.nodes; }, 600);
  const int64_t rss_declared = RssBytes(coord);
  std::printf("job declared by %d streams: coordinator RSS %.1f MB\n", shared->declared.load(),
              rss_declared / 1e6);

  // Verdicts, watched from here (gRPC starts in this process only now).
  std::mutex mu;
  std::vector<double> verdict_ms;
  std::vector<double> verdict_from_end_ms;  // sidecar batching: from the step's last rank's end
  int64_t verdicts_seen = 0;
  std::set<int64_t> windows_seen;  // by last step
  std::vector<std::string> by_window;  // each window's figures, as the verdicts came
  grpc::ClientContext watch_ctx;
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(o.port),
                                     grpc::InsecureChannelCredentials());
  std::thread watcher([&] {
    auto stub = v1::Query::NewStub(channel);
    v1::WatchVerdictsRequest req;
    req.set_job(kJob);
    auto reader = stub->WatchVerdicts(&watch_ctx, req);
    v1::VerdictEvent ev;
    while (reader->Read(&ev)) {
      const int64_t now = shm::MonotonicNowNs();
      const int64_t last = ev.verdict().last_step();
      if (last < 0 || last >= o.steps) continue;
      const int64_t ready = shared->sent_ns[last].load();
      std::lock_guard<std::mutex> lock(mu);
      // A window's first verdict only: once the streams end, the coordinator says again what
      // it knows of the job (its ranks' sources gone), which is no latency of a window's.
      if (!windows_seen.insert(last).second) continue;
      ++verdicts_seen;
      char row[160];
      int at = std::snprintf(row, sizeof(row), "step %lld:", static_cast<long long>(last));
      if (ready > 0) {
        verdict_ms.push_back((now - ready) / 1e6);
        at += std::snprintf(row + at, sizeof(row) - at, " %.0f ms after the last send",
                            verdict_ms.back());
      }
      if (o.sidecar_batching) {
        const int64_t end = shared->send_start_ns.load() +
                            static_cast<int64_t>((last + 1) / o.step_rate * 1e9) + 2'000'000;
        verdict_from_end_ms.push_back((now - end) / 1e6);
        std::snprintf(row + at, sizeof(row) - at, ", %.0f ms after the step's end",
                      verdict_from_end_ms.back());
      }
      by_window.push_back(row);
    }
  });
  const auto clients_cpu = [&] {
    double sum = 0;
    for (pid_t c : clients) sum += CpuSeconds(c);
    return sum;
  };
  const double cpu0 = CpuSeconds(coord);
  const std::map<std::string, double> threads0 = bench::ThreadCpuSeconds(coord);
  const double clients_cpu0 = clients_cpu();
  const auto t_send = std::chrono::steady_clock::now();
  shared->send_start_ns.store(shm::MonotonicNowNs());
  shared->phase.store(2);
  ok = ok &&
       WaitFor([&] { return shared->finished.load() + shared->failed.load() >= o.nodes; }, 3600);
  const double send_s = elapsed(t_send);
  const double cpu = CpuSeconds(coord) - cpu0;
  const std::map<std::string, double> threads1 = bench::ThreadCpuSeconds(coord);
  const double client_cpu = clients_cpu() - clients_cpu0;
  const int64_t rss_end = RssBytes(coord);
  SleepMs(1000);
  // Every stream ends at once (the clients exit: a job's nodes leaving, a network cut): what
  // that costs the coordinator, until it is idle again (under 10% of a core for a second).
  const double close_cpu0 = CpuSeconds(coord);
  const auto t_close = std::chrono::steady_clock::now();
  shared->phase.store(3);
  for (pid_t c : clients) waitpid(c, nullptr, 0);
  const double clients_gone_s = elapsed(t_close);
  for (double before = CpuSeconds(coord); elapsed(t_close) < 600;) {
    SleepMs(1000);
    const double now_cpu = CpuSeconds(coord);
    if (now_cpu - before < 0.1) break;
    before = now_cpu;
  }
  const double close_cpu = CpuSeconds(coord) - close_cpu0;
  const double close_s = elapsed(t_close);
  watch_ctx.TryCancel();
  watcher.join();
  kill(coord, SIGTERM);
  waitpid(coord, nullptr, 0);

  std::vector<double> acks;
  for (int p = 0; p < o.procs; ++p) {
    std::ifstream in(dir + "/lat." + std::to_string(p), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t n = bytes.size() / sizeof(double);
    const size_t at = acks.size();
    acks.resize(at + n);
    std::memcpy(acks.data() + at, bytes.data(), n * sizeof(double));
  }
  std::sort(acks.begin(), acks.end());
  std::sort(verdict_ms.begin(), verdict_ms.end());
  std::sort(verdict_from_end_ms.begin(), verdict_from_end_ms.end());
  const int64_t accepted = shared->accepted.load();
  std::printf(
      "sent for %.2f s: %lld rank-steps accepted (late %lld, rejected %lld, duplicates %lld) in "
      "%lld batches: %.3f M rank-steps/s wall\n",
      send_s, static_cast<long long>(accepted), static_cast<long long>(shared->late.load()),
      static_cast<long long>(shared->rejected.load()),
      static_cast<long long>(shared->duplicates.load()),
      static_cast<long long>(shared->batches.load()), accepted / send_s / 1e6);
  if (o.sidecar_batching) {
    std::printf("health messages: %lld (%.0f a second); health riding batches: %lld\n",
                static_cast<long long>(shared->health.load()), shared->health.load() / send_s,
                static_cast<long long>(shared->health_riding.load()));
  }
  std::printf(
      "coordinator CPU %.2f s (%.0f%% of one core): %.3f M rank-steps per coordinator "
      "CPU-second\n",
      cpu, 100 * cpu / send_s, cpu > 0 ? accepted / cpu / 1e6 : -1.0);
  // By thread (daemon/common/thread_name.h): gRPC's own threads read and parse, and run
  // OnBatch; sf-acker sends the acks; sf-journal-comp compacts; sf-ticker closes steps.
  std::printf("coordinator CPU by thread: %s\n",
              bench::DescribeThreadCpu(threads0, threads1).c_str());
  // The sidecar-like clients share this machine's cores with the coordinator: what they take
  // is not the coordinator's, but it is time the coordinator waits for a core.
  std::printf("client processes' CPU %.2f s (%.0f%% of one core, on the same machine)\n",
              client_cpu, 100 * client_cpu / send_s);
  std::printf("ack latency over %zu batches: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", acks.size(),
              Pct(acks, 0.5), Pct(acks, 0.99), acks.empty() ? -1 : acks.back());
  std::printf("verdict latency over %zu of %lld windows: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
              verdict_ms.size(), static_cast<long long>(verdicts_seen), Pct(verdict_ms, 0.5),
              Pct(verdict_ms, 0.99), verdict_ms.empty() ? -1 : verdict_ms.back());
  // A p99 over a few windows is their slowest: each window's, to tell one slow window from all.
  std::string windows_row;
  for (const std::string& w : by_window) windows_row += (windows_row.empty() ? "" : "; ") + w;
  std::printf("verdicts by window: %s\n", windows_row.c_str());
  if (o.sidecar_batching) {
    std::printf(
        "verdict latency from the window's last step's end (the hold included): p50 %.2f ms, "
        "p99 %.2f ms, max %.2f ms\n",
        Pct(verdict_from_end_ms, 0.5), Pct(verdict_from_end_ms, 0.99),
        verdict_from_end_ms.empty() ? -1 : verdict_from_end_ms.back());
  }
  std::printf("coordinator RSS at the end: %.1f MB\n", rss_end / 1e6);
  std::printf(
      "streams closed (%d, the clients exited %.1f s after being told): coordinator CPU %.2f s "
      "until idle %.1f s after\n",
      held, clients_gone_s, close_cpu, close_s);
  // A run that lost streams or records keeps the coordinator's log for the reason.
  const int failed = shared->failed.load();
  const bool troubled = failed > 0 || shared->late.load() > 0 || shared->duplicates.load() > 0;
  if (failed > 0) {
    std::printf("streams that ended with an error: %d (the first three are printed above)\n",
                failed);
  }
  if (o.data_dir.empty() && !troubled) {
    const std::string rm = "rm -rf " + dir;
    if (std::system(rm.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir.c_str());
  } else {
    std::printf("coordinator log: %s/coordinator.log\n", dir.c_str());
  }
  return ok && held == o.nodes ? 0 : 1;
}
