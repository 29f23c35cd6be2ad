// Fuzz target: arbitrary bytes as a recorded run (docs/run-format.md). ParseRun must return
// a run or an error naming the line, never crash or read out of bounds.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "daemon/analyze/run_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  absl::StatusOr<stagefrontier::RecordedRun> run = stagefrontier::ParseRun(in);
  return run.ok() ? 0 : 0;
}
