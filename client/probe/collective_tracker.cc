#include "client/probe/collective_tracker.h"

#include <algorithm>

#include "shm/monotonic_clock.h"

namespace stagefrontier::probe {

CollectiveTracker::CollectiveTracker(EventBackend* backend, shm::ProbeRingWriter* ring,
                                     TrackerOptions options)
    : backend_(backend),
      ring_(ring),
      options_(options),
      pending_(new Pending[options.max_pending]),
      mask_(options.max_pending - 1) {}

bool CollectiveTracker::ShouldSample() noexcept {
  using Mode = SamplingPolicy::Mode;
  const shm::v1::SlotHeader* slot = options_.slot;
  if (options_.sampling.mode == Mode::kAll || slot == nullptr) {
    return options_.sampling.mode == Mode::kAll;
  }
  const uint64_t steps = slot->write_cursor.load(std::memory_order_relaxed);
  if (options_.sampling.mode == Mode::kEveryN) {
    return options_.sampling.every_n_steps <= 1 || steps % options_.sampling.every_n_steps == 0;
  }
  // On request: the window's length in steps, counted from when this request was first seen.
  const int64_t first = slot->control.trace_first_step.load(std::memory_order_relaxed);
  const int64_t last = slot->control.trace_last_step.load(std::memory_order_relaxed);
  const uint64_t id = slot->control.request_id.load(std::memory_order_relaxed);
  if (id == 0 || last < first) return false;  // never asked, or no window
  if (id != request_seen_) {
    request_seen_ = id;
    request_cursor_ = steps;
  }
  return steps - request_cursor_ <= static_cast<uint64_t>(last - first);
}

int64_t CollectiveTracker::Begin(const CollectiveCall& call, void* stream) noexcept {
  begun_.fetch_add(1, std::memory_order_relaxed);
  ring_->CountSeen();
  if (busy_.test_and_set(std::memory_order_acquire)) {
    dropped_busy_.fetch_add(1, std::memory_order_relaxed);
    return kNotSampled;
  }
  if (!ShouldSample()) {
    busy_.clear(std::memory_order_release);
    return kNotSampled;
  }
  const uint64_t h = head_.load(std::memory_order_relaxed);
  if (h - tail_.load(std::memory_order_acquire) > mask_) {
    dropped_queue_.fetch_add(1, std::memory_order_relaxed);
    busy_.clear(std::memory_order_release);
    return kNotSampled;
  }
  Pending& p = pending_[h & mask_];
  p.call = call;
  p.call_ns = shm::MonotonicNowNs();
  p.seq = next_seq_++;
  p.ok = true;
  entering_ns_.store(p.call_ns, std::memory_order_seq_cst);
  if (!backend_->Record(2 * (h & mask_), stream)) p.ok = false;
  sampled_.fetch_add(1, std::memory_order_relaxed);
  return static_cast<int64_t>(h);
}

void CollectiveTracker::AddToGroup(int64_t ticket, uint64_t bytes) noexcept {
  if (ticket == kNotSampled) return;
  pending_[static_cast<uint64_t>(ticket) & mask_].call.bytes += bytes;
}

void CollectiveTracker::End(int64_t ticket, void* stream, bool ok) noexcept {
  if (ticket == kNotSampled) return;
  const uint64_t h = static_cast<uint64_t>(ticket);
  Pending& p = pending_[h & mask_];
  if (!ok || !p.ok || !backend_->Record(2 * (h & mask_) + 1, stream)) {
    // Nothing reaches the resolver: the slot is reused by the next Begin.
    dropped_failed_.fetch_add(1, std::memory_order_relaxed);
    entering_ns_.store(0, std::memory_order_release);
    busy_.clear(std::memory_order_release);
    return;
  }
  head_.store(h + 1, std::memory_order_release);
  entering_ns_.store(0, std::memory_order_release);
  busy_.clear(std::memory_order_release);
}

size_t CollectiveTracker::Poll(int64_t now_ns) noexcept {
  backend_->Maintain(now_ns);
  const int64_t entering = entering_ns_.load(std::memory_order_seq_cst);
  uint64_t t = tail_.load(std::memory_order_relaxed);
  const uint64_t h = head_.load(std::memory_order_acquire);
  size_t published = 0;
  for (; t < h; ++t) {
    const Pending& p = pending_[t & mask_];
    int64_t start = 0;
    int64_t end = 0;
    const EventStatus s0 = backend_->Query(2 * (t & mask_), &start);
    const EventStatus s1 =
        s0 == EventStatus::kReady ? backend_->Query(2 * (t & mask_) + 1, &end) : s0;
    if (s1 == EventStatus::kPending) {
      if (now_ns - p.call_ns < options_.unresolved_after_ns) break;  // keep call order
      unresolved_.fetch_add(1, std::memory_order_relaxed);
      ring_->CountUnresolved();
      continue;
    }
    if (s0 == EventStatus::kError || s1 == EventStatus::kError) {
      unresolved_.fetch_add(1, std::memory_order_relaxed);
      ring_->CountUnresolved();
      continue;
    }
    shm::ProbeInterval out;
    out.call_ns = p.call_ns;
    // A GPU clock converted to the host's may land a few microseconds before the call.
    out.start_ns = std::max(start, p.call_ns);
    out.end_ns = std::max(end, out.start_ns);
    out.bytes = p.call.bytes;
    out.comm_id = p.call.comm_id;
    out.collective_seq = p.seq;
    out.op = p.call.op;
    out.flags = p.call.flags;
    if (ring_->TryPublish(out)) {
      published_.fetch_add(1, std::memory_order_relaxed);
      ++published;
    } else {
      dropped_ring_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  tail_.store(t, std::memory_order_release);
  // Everything called before the oldest unresolved collective (or before now, or before the
  // call being issued) is published.
  int64_t through = now_ns;
  if (t < h) through = std::min(through, pending_[t & mask_].call_ns);
  if (entering != 0) through = std::min(through, entering);
  ring_->SetResolvedThrough(through);
  return published;
}

TrackerStats CollectiveTracker::stats() const noexcept {
  TrackerStats s;
  s.begun = begun_.load(std::memory_order_relaxed);
  s.sampled = sampled_.load(std::memory_order_relaxed);
  s.published = published_.load(std::memory_order_relaxed);
  s.dropped_busy = dropped_busy_.load(std::memory_order_relaxed);
  s.dropped_queue = dropped_queue_.load(std::memory_order_relaxed);
  s.dropped_failed = dropped_failed_.load(std::memory_order_relaxed);
  s.dropped_ring = dropped_ring_.load(std::memory_order_relaxed);
  s.unresolved = unresolved_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace stagefrontier::probe
