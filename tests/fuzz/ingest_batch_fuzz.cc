// Fuzz target: arbitrary bytes as an ingest message (SidecarMessage), the way the coordinator
// decodes it: protobuf parse, then every RankSteps' packed vector with the stage count its
// rank declared. Decoding must fail cleanly, never crash or read out of bounds. Bytes that do
// not parse are also tried as a bare packed vector (first byte: stage count).
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "daemon/wire/packed_steps.h"
#include "stagefrontier/v1/ingest.pb.h"

namespace {
void Decode(const std::string& bytes, uint32_t count, int64_t base, uint32_t stages) {
  (void)stagefrontier::wire::DecodePackedSteps(bytes, count, base, stages,
                                               [](int64_t, const int64_t*, uint32_t) {});
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  stagefrontier::v1::SidecarMessage msg;
  if (msg.ParseFromArray(data, static_cast<int>(size)) && msg.has_batch()) {
    std::map<std::pair<std::string, int32_t>, uint32_t> stages;
    for (const auto& d : msg.batch().declarations()) {
      stages[{d.job(), d.rank()}] = static_cast<uint32_t>(d.stages_size());
    }
    for (const auto& rs : msg.batch().steps()) {
      auto it = stages.find({rs.job(), rs.rank()});
      Decode(rs.packed(), rs.count(), rs.base_step(), it == stages.end() ? 5 : it->second);
    }
  } else if (size >= 5) {
    const uint32_t stages = data[0] % 34;
    const uint32_t count = (uint32_t{data[1]} | uint32_t{data[2]} << 8) % 70000;
    const int64_t base = static_cast<int8_t>(data[3]);
    Decode(std::string(reinterpret_cast<const char*>(data) + 4, size - 4), count, base, stages);
  }
  return 0;
}
