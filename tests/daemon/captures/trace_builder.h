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

// Steps 20..24 of a stage "forward" holding one matmul of `mm_us`, as a capture of rank
// `rank` holds them.
inline std::string ForwardStageTrace(int rank, double mm_us) {
  TraceBuilder b(rank);
  for (int step = 20; step < 25; ++step) {
    const double base = step * 10'000.0;
    b.Add("ProfilerStep#" + std::to_string(step), base, 9000, 1, "user_annotation");
    b.Add("stagefrontier:forward", base, 1000 + mm_us, 1, "user_annotation");
    b.Add("aten::mm", base + 100, mm_us);
  }
  return b.Json();
}

}  // namespace stagefrontier::testing

#endif  // STAGEFRONTIER_TESTS_DAEMON_CAPTURES_TRACE_BUILDER_H_
