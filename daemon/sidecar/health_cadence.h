// When the sidecar sends its slots' health (issue 33: at 100,000 GPUs a report per node per
// second was 12,500 messages a second, the coordinator's largest cost; docs/results.md
// "Coordinator ingest through gRPC"). Health carries two things the coordinator needs at
// different speeds:
//   * where each rank is, for the stall watch — only while a stall may be forming, i.e. while a
//     rank of the node has had its stage (or the gap between steps) open past the report
//     threshold: then every stalled_every_ns, as before;
//   * that the sidecar is alive, and its slots' counters — otherwise: after quiet_after_ns with
//     nothing sent (a batch is a sign of life too: the coordinator counts it), and at least
//     every max_gap_ns.
// So a node that sends a batch every 4 s (4 steps of a 1 step/s job) adds one health message
// between two batches instead of four, and the coordinator's "sidecar lost after 3 s of silence"
// (stall_watch.h) holds for a live sidecar. 2.5 s, not 2: 2 s after a batch and 2 s after that
// health fall due with the next batch, and a health that wins that race is one more per batch.
//
// No clock, no I/O: callers pass `now_ns`.
//
//   HealthCadence cadence;
//   cadence.Start(now);                      // the stream opened
//   if (cadence.Due(now, stage_open_long)) { send_health(); cadence.Sent(now, true); }
//   ... a batch went out: cadence.Sent(now, false);
#ifndef STAGEFRONTIER_DAEMON_SIDECAR_HEALTH_CADENCE_H_
#define STAGEFRONTIER_DAEMON_SIDECAR_HEALTH_CADENCE_H_

#include <cstdint>

namespace stagefrontier {

struct HealthCadenceOptions {
  int64_t stalled_every_ns = 1'000'000'000;
  int64_t quiet_after_ns = 2'500'000'000;
  int64_t max_gap_ns = 5'000'000'000;
};

class HealthCadence {
 public:
  explicit HealthCadence(HealthCadenceOptions options = {}) : options_(options) {}

  // A new stream opened at `now_ns` (its first batch declares the node's ranks, and their health
  // goes right before it: ingest_streamer.cc; the cadence counts from here).
  void Start(int64_t now_ns);
  // A message went out at `now_ns`: a health report (`health`) or another (a batch).
  void Sent(int64_t now_ns, bool health);
  // Whether health is due at `now_ns`; `stage_open_long`: a rank of the node has had its stage
  // open past the report threshold.
  bool Due(int64_t now_ns, bool stage_open_long) const { return now_ns >= NextNs(stage_open_long); }
  // When health is next due (for a caller that sleeps until then).
  int64_t NextNs(bool stage_open_long) const;

 private:
  HealthCadenceOptions options_;
  bool started_ = false;
  int64_t last_any_ns_ = 0;
  int64_t last_health_ns_ = 0;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SIDECAR_HEALTH_CADENCE_H_
