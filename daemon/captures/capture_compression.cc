#include "daemon/captures/capture_compression.h"

#include <zlib.h>

#include "absl/strings/str_cat.h"

namespace stagefrontier {

std::string DeflateChunk(std::string_view raw) {
  uLongf size = compressBound(static_cast<uLong>(raw.size()));
  std::string out(size, '\0');
  if (compress2(reinterpret_cast<Bytef*>(out.data()), &size,
                reinterpret_cast<const Bytef*>(raw.data()), static_cast<uLong>(raw.size()),
                Z_DEFAULT_COMPRESSION) != Z_OK) {
    return std::string();  // only Z_MEM_ERROR is possible here
  }
  out.resize(size);
  return out;
}

absl::StatusOr<std::string> InflateChunk(std::string_view packed, size_t raw_bytes) {
  std::string out(raw_bytes, '\0');
  z_stream z{};
  if (inflateInit(&z) != Z_OK) return absl::InternalError("zlib: inflateInit failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data()));
  z.avail_in = static_cast<uInt>(packed.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = inflate(&z, Z_FINISH);
  const size_t produced = out.size() - z.avail_out;
  const bool trailing = z.avail_in != 0;
  const char* msg = z.msg;
  inflateEnd(&z);
  if (rc == Z_STREAM_END && produced == raw_bytes && !trailing) return out;
  if (rc == Z_BUF_ERROR && z.avail_out == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the chunk inflates to more than the ", raw_bytes, " bytes it announces"));
  }
  if (rc == Z_STREAM_END) {
    return absl::InvalidArgumentError(absl::StrCat("the chunk inflates to ", produced,
                                                   " bytes, not the ", raw_bytes, " it announces",
                                                   trailing ? " (bytes after its end)" : ""));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "the chunk is not a complete zlib stream (zlib: ", msg != nullptr ? msg : "truncated", ")"));
}

}  // namespace stagefrontier
