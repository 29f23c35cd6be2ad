// Fuzz target: arbitrary bytes as a captured torch.profiler trace, down to the operator
// comparison (`stagefrontier compare-ops`). Parsing and profiling must return a profile or an
// error, never crash; a profile compared with itself must give finite figures and at most
// `top` findings.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "daemon/captures/chrome_trace.h"
#include "daemon/captures/operator_compare.h"
#include "daemon/captures/operator_profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const stagefrontier::StageSchema schema =
      *stagefrontier::StageSchema::Parse("data:io,forward:compute,backward:mixed,sync:sync");
  absl::StatusOr<stagefrontier::ChromeTrace> t = stagefrontier::ParseChromeTrace(
      absl::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  if (!t.ok()) return 0;
  for (const char* stage : {"data", "forward", "backward", "sync"}) {
    absl::StatusOr<stagefrontier::OperatorProfile> p =
        stagefrontier::ProfileOperators(*t, schema, stage, "fuzz");
    if (!p.ok()) continue;
    for (const auto& [path, steps] : p->operators) {
      if (steps.size() != p->steps.size()) std::abort();
    }
    stagefrontier::CompareOptions options;
    options.top = 3;
    absl::StatusOr<stagefrontier::OperatorReport> r =
        stagefrontier::CompareOperators(*p, {*p}, options);
    if (!r.ok()) std::abort();  // a profile with steps always compares with itself
    if (r->findings.size() > options.top) std::abort();
    for (const stagefrontier::OperatorFinding& f : r->findings) {
      if (!std::isfinite(f.excess_ns) || !std::isfinite(f.z)) std::abort();
    }
  }
  return 0;
}
