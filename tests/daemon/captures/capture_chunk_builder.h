// Test helper: a capture file's chunk as a sidecar sends it (zlib, offset, sizes).
#ifndef STAGEFRONTIER_TESTS_DAEMON_CAPTURES_CAPTURE_CHUNK_BUILDER_H_
#define STAGEFRONTIER_TESTS_DAEMON_CAPTURES_CAPTURE_CHUNK_BUILDER_H_

#include <string>
#include <string_view>

#include "daemon/captures/capture_compression.h"
#include "stagefrontier/v1/captures.pb.h"

namespace stagefrontier::testing {

// The chunk of `whole` (the file named `file` of job `job`, from node0) at [offset, offset + n).
inline v1::CaptureChunk MakeChunk(const std::string& file, const std::string& whole,
                                  size_t offset, size_t n, const std::string& job = "job1") {
  v1::CaptureChunk c;
  c.set_job(job);
  c.set_node("node0");
  c.set_file_name(file);
  c.set_file_bytes(whole.size());
  c.set_offset(offset);
  c.set_raw_bytes(static_cast<uint32_t>(n));
  c.set_data(DeflateChunk(std::string_view(whole).substr(offset, n)));
  return c;
}

}  // namespace stagefrontier::testing

#endif  // STAGEFRONTIER_TESTS_DAEMON_CAPTURES_CAPTURE_CHUNK_BUILDER_H_
