// Test helper: Chrome trace JSON as torch.profiler writes it, event by event.
#ifndef STAGEFRONTIER_TESTS_DAEMON_CAPTURES_TRACE_BUILDER_H_
#define STAGEFRONTIER_TESTS_DAEMON_CAPTURES_TRACE_BUILDER_H_

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace stagefrontier::testing {

class TraceBuilder {
 public:
  explicit TraceBuilder(int rank) : rank_(rank) {}
  // A complete event; times in microseconds.
  TraceBuilder& Add(const std::string& name, double ts_us, double dur_us, int tid = 1,
                    const std::string& cat = "cpu_op", int pid = 100) {
    events_.push_back(absl::StrCat("{\"ph\":\"X\",\"cat\":\"", cat, "\",\"name\":\"", name,
                                   "\",\"pid\":", pid, ",\"tid\":", tid, ",\"ts\":", ts_us,
                                   ",\"dur\":", dur_us, "}"));
    return *this;
  }
  std::string Json() const {
    return absl::StrCat("{\"distributedInfo\":{\"rank\":", rank_,
                        ",\"world_size\":4},\"traceEvents\":[", absl::StrJoin(events_, ","), "]}");
  }

 private:
  int rank_;
  std::vector<std::string> events_;
};

}  // namespace stagefrontier::testing

#endif  // STAGEFRONTIER_TESTS_DAEMON_CAPTURES_TRACE_BUILDER_H_
