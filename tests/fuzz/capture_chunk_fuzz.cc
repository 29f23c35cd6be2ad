// Fuzz target: arbitrary bytes as a capture chunk (proto/stagefrontier/v1/captures.proto) the
// way the coordinator takes it: protobuf parse, then CaptureStore::Accept into a scratch store
// with small limits (names checked, zlib inflated to exactly raw_bytes, appended, renamed,
// retention). Bytes that do not parse are inflated as a bare chunk (first 2 bytes: raw size).
// Must fail cleanly: never crash, never write outside the store's root.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "daemon/captures/capture_compression.h"
#include "daemon/captures/capture_store.h"

namespace {

stagefrontier::CaptureStore& Store() {
  static stagefrontier::CaptureStore* store = [] {
    const std::string root = "/tmp/sf_capture_chunk_fuzz_" + std::to_string(::getpid());
    auto* s = new stagefrontier::CaptureStore({.root = root,
                                               .max_file_bytes = 1 << 20,
                                               .max_total_bytes = 4 << 20,
                                               .max_files = 8,
                                               .max_chunk_bytes = 1 << 16});
    (void)s->Open();
    return s;
  }();
  return *store;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  stagefrontier::v1::CaptureChunk chunk;
  if (chunk.ParseFromArray(data, static_cast<int>(size))) {
    (void)Store().Accept(chunk);
  } else if (size >= 2) {
    const size_t raw = (size_t{data[0]} | size_t{data[1]} << 8);
    (void)stagefrontier::InflateChunk(
        std::string_view(reinterpret_cast<const char*>(data) + 2, size - 2), raw);
  }
  return 0;
}
