// Fuzz target: arbitrary bytes as a torch.profiler Chrome trace (`stagefrontier reduce-trace`).
// ReduceChromeTrace must return a reduction or an error naming what is wrong, never crash,
// and every reduced step must have monotonic boundaries.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "daemon/captures/trace_reduce.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const stagefrontier::StageSchema schema = *stagefrontier::StageSchema::Parse(
      "data:io,forward:compute,backward:mixed,optimizer:compute");
  absl::StatusOr<stagefrontier::RankTrace> t = stagefrontier::ReduceChromeTrace(
      absl::string_view(reinterpret_cast<const char*>(data), size), schema, "fuzz");
  if (!t.ok()) return 0;
  for (const auto& [step, b] : t->steps) {
    if (b.size() != schema.size() + 1) std::abort();
    for (size_t k = 1; k < b.size(); ++k) {
      if (b[k] < b[k - 1]) std::abort();
    }
  }
  return 0;
}
