// Says a repeated event once, then at most once per interval, with how many times it happened
// meanwhile: a condition that lasts (every record of a rank refused, a coordinator that stays
// away) must be visible without a log line per occurrence.
//
//   LogThrottle throttle(std::chrono::seconds(60));
//   if (std::optional<uint64_t> n = throttle.Pass(key, records, Clock::now())) {
//     log(absl::StrCat("refused ", *n, " records of ..."));   // n: all since the last line
//   }
#ifndef STAGEFRONTIER_DAEMON_COMMON_LOG_THROTTLE_H_
#define STAGEFRONTIER_DAEMON_COMMON_LOG_THROTTLE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace stagefrontier {

class LogThrottle {
 public:
  using Clock = std::chrono::steady_clock;
  explicit LogThrottle(Clock::duration interval, size_t max_keys = 1000)
      : interval_(interval), max_keys_(max_keys) {}

  // Adds `count` to `key`'s tally. Returns the tally since the last line (this one included)
  // when a line is due now — the first time for the key, or `interval` after its last line —
  // and nothing otherwise.
  std::optional<uint64_t> Pass(const std::string& key, uint64_t count, Clock::time_point now) {
    auto it = keys_.find(key);
    if (it == keys_.end()) {
      if (keys_.size() >= max_keys_) keys_.clear();  // bounded: a key may then be said again
      keys_[key] = Tally{now, 0};
      return count;
    }
    it->second.held += count;
    if (now - it->second.said < interval_) return std::nullopt;
    const uint64_t n = it->second.held;
    it->second = Tally{now, 0};
    return n;
  }

 private:
  struct Tally {
    Clock::time_point said;  // when its last line went out
    uint64_t held = 0;       // counted since
  };
  Clock::duration interval_;
  size_t max_keys_;
  std::map<std::string, Tally> keys_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COMMON_LOG_THROTTLE_H_
