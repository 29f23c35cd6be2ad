// When the sidecar sends its slots' health (issue 33: at 100,000 GPUs a report per node per
// second was 12,500 messages a second, the coordinator's largest cost; docs/results.md
// "Coordinator ingest through gRPC"). Health carries three things the coordinator needs at
// different speeds:
//   * where each rank is, for the stall watch — only while a stall may be forming, i.e. while a
//     rank of the node has had its stage (or the gap between steps) open past the report
//     threshold: then every stalled_every_ns;
//   * news — a slot claimed or released, an owner gone, a counter of trouble that grew, a
//     self-test or layout answer (HealthNews below): at once, at most every stalled_every_ns;
//   * that the sidecar is alive, and its progress counters — otherwise: after quiet_after_ns
//     with nothing sent (a batch is a sign of life too: the coordinator counts it), and at
//     least every max_gap_ns.
// The coordinator's stall watch takes a sidecar silent for 4.75 s for lost (stall_watch.h), but
// looks at silence only once a job has not advanced for its stall limit (>= 5 s), by which time
// every live sidecar of the job sends health every second (its ranks' stages are open past the
// threshold). A coordinator that says its step deadline (StreamLimits) lets a sidecar be quiet
// between batches for its longest hold and half a second (9.5 s against a 10 s deadline): a
// node whose ranks step at 1 step/s sends a batch every 8 s (8 steps per message, batch_hold.h)
// and no health between them, one every 30 s instead of one per batch.
//
// No clock, no I/O: callers pass `now_ns`.
//
//   HealthCadence cadence;
//   cadence.Start(now);                      // the stream opened
//   if (cadence.Due(now, stage_open_long, news)) { send_health(); cadence.Sent(now, true); }
//   ... a batch went out: cadence.Sent(now, false);
//   ... or health rode it (a coordinator that reads StepBatch.health):
//   if (cadence.RidesBatch(now, hold_ns, stage_open_long, news)) { fill batch.health; Sent(now,
//   true); }
#ifndef STAGEFRONTIER_DAEMON_SIDECAR_HEALTH_CADENCE_H_
#define STAGEFRONTIER_DAEMON_SIDECAR_HEALTH_CADENCE_H_

#include <cstdint>
#include <string>

#include "stagefrontier/v1/ingest.pb.h"

namespace stagefrontier {

struct HealthCadenceOptions {
  int64_t stalled_every_ns = 1'000'000'000;
  int64_t quiet_after_ns = 9'500'000'000;
  int64_t max_gap_ns = 30'000'000'000;
  // A capture answer (urgent: the next request's answer may replace it in the slot) goes at
  // once, but at most this often: the slot is the trainer's user's to write, and one that
  // flips its answer at every poll must not make the sidecar send a report every millisecond.
  int64_t urgent_every_ns = 100'000'000;
};

// The cadence a coordinator allows, from what it said after the Hello (StreamLimits):
// `configured` capped so that something goes out before its silence limit (the stall cadence
// at most silent_after_ms less 250 ms: 4.5 s against 4.75 s; the quiet one too, or the longest
// batch hold and 500 ms when the coordinator says its step deadline: 9.5 s) and within half its
// idle timeout (the max gap: 30 s against 60 s). The defaults are those caps, so only flags set
// past them change. `limits` null: a coordinator from before StreamLimits (its first message
// was an ack, or none came yet), whose stall watch took a sidecar for lost after 3 s: its
// cadence, health after 2.5 s of silence and at least every 5 s (kPredatingCoordinator).
HealthCadenceOptions CadenceFor(const HealthCadenceOptions& configured,
                                const v1::StreamLimits* limits);
inline constexpr HealthCadenceOptions kPredatingCoordinator = {.stalled_every_ns = 1'000'000'000,
                                                               .quiet_after_ns = 2'500'000'000,
                                                               .max_gap_ns = 5'000'000'000};

class HealthCadence {
 public:
  explicit HealthCadence(HealthCadenceOptions options = {}) : options_(options) {}

  // New bounds for an open stream (the coordinator's StreamLimits came); what was sent counts.
  void set_options(HealthCadenceOptions options) { options_ = options; }
  const HealthCadenceOptions& options() const { return options_; }

  // A new stream opened at `now_ns` (its first batch declares the node's ranks, and their health
  // goes right before it: ingest_streamer.cc; the cadence counts from here).
  void Start(int64_t now_ns);
  // A message went out at `now_ns`: a health report (`health`) or another (a batch).
  void Sent(int64_t now_ns, bool health);
  // Whether health is due at `now_ns`; `stage_open_long`: a rank of the node has had its stage
  // open past the report threshold; `news`: the slots' health differs from the last sent in
  // more than progress (HealthNews).
  // `urgent`: a capture answer changed (at most every urgent_every_ns).
  bool Due(int64_t now_ns, bool stage_open_long, bool news = false, bool urgent = false) const {
    return now_ns >= NextNs(stage_open_long, news, urgent);
  }
  // When health is next due (for a caller that sleeps until then).
  int64_t NextNs(bool stage_open_long, bool news = false, bool urgent = false) const;
  // Whether health should ride a batch going out at `now_ns` (StepBatch.health) instead of
  // going alone: it is due now, or its liveness bound (quiet, max gap; counting the batch as
  // the sign of life it is) comes before the next batch, expected within
  // `next_batch_within_ns` (the hold). Never later than due; earlier only for liveness: the
  // stall, news and urgent cadences are caps too. A next batch that comes later leaves health
  // to Due().
  bool RidesBatch(int64_t now_ns, int64_t next_batch_within_ns, bool stage_open_long,
                  bool news = false, bool urgent = false) const;
  // When health last went (alone or riding a batch), or the stream opened (Start).
  int64_t last_health_ns() const { return last_health_ns_; }

 private:
  HealthCadenceOptions options_;
  bool started_ = false;
  int64_t last_any_ns_ = 0;
  int64_t last_health_ns_ = 0;
};

// What of `health` is news to the coordinator: the report without what moves at every step
// (records read, pending, probe intervals, where each rank is). Two reports with equal keys
// differ only in progress. A field added to SlotHealth is news until listed here.
std::string HealthNews(v1::Health health);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SIDECAR_HEALTH_CADENCE_H_
