#include "daemon/archive/column_codec.h"

#include <zstd.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "daemon/wire/varint.h"

namespace stagefrontier::archive {

absl::Status BadBlock(const char* format, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(format, ": ", what));
}

absl::Status ColumnReader::Varint(uint64_t* v) {
  if (!wire::GetVarint(p_, end_, v)) {
    return BadBlock(format_, absl::StrCat(name_, " column cut short"));
  }
  return absl::OkStatus();
}

absl::Status ColumnReader::Signed(int64_t* v) {
  uint64_t u = 0;
  if (absl::Status s = Varint(&u); !s.ok()) return s;
  *v = wire::UnZigZag(u);
  return absl::OkStatus();
}

absl::Status ColumnReader::Bytes(uint64_t n, absl::string_view* out) {
  if (n > left()) return BadBlock(format_, absl::StrCat(name_, " column cut short"));
  *out = absl::string_view(p_, n);
  p_ += n;
  return absl::OkStatus();
}

absl::Status ColumnReader::Done() const {
  if (p_ != end_) {
    return BadBlock(format_, absl::StrCat(left(), " bytes left over in the ", name_, " column"));
  }
  return absl::OkStatus();
}

void AppendColumns(std::span<const std::string> columns, std::string* raw) {
  for (const std::string& c : columns) {
    wire::PutVarint(*raw, c.size());
    raw->append(c);
  }
}

absl::Status SplitColumns(absl::string_view raw, std::span<const char* const> names,
                          const char* format, std::span<ColumnReader> out) {
  ColumnReader all(raw, format, "block");
  for (size_t c = 0; c < out.size(); ++c) {
    uint64_t n = 0;
    absl::string_view bytes;
    if (!all.Varint(&n).ok() || !all.Bytes(n, &bytes).ok()) {
      return BadBlock(format, absl::StrCat("the ", names[c], " column is cut short"));
    }
    out[c] = ColumnReader(bytes, format, names[c]);
  }
  return all.Done();
}

absl::Status AppendZstdFrame(absl::string_view raw, int level, const char* format,
                             std::string* out) {
  const size_t start = out->size();
  out->resize(start + ZSTD_compressBound(raw.size()));
  std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> ctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
  if (ctx == nullptr) {
    out->resize(start);
    return absl::InternalError(absl::StrCat(format, ": zstd: out of memory"));
  }
  ZSTD_CCtx_setParameter(ctx.get(), ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(ctx.get(), ZSTD_c_checksumFlag, 1);
  const size_t n =
      ZSTD_compress2(ctx.get(), out->data() + start, out->size() - start, raw.data(), raw.size());
  if (ZSTD_isError(n)) {
    out->resize(start);
    return absl::InternalError(absl::StrCat(format, ": zstd: ", ZSTD_getErrorName(n)));
  }
  out->resize(start + n);
  return absl::OkStatus();
}

absl::StatusOr<std::string> DecompressZstdFrame(absl::string_view frame, uint64_t raw_size,
                                                const char* format) {
  const unsigned long long content = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (content == ZSTD_CONTENTSIZE_ERROR || content == ZSTD_CONTENTSIZE_UNKNOWN ||
      content != raw_size) {
    return BadBlock(format, "its zstd frame is damaged or does not hold the size the header says");
  }
  const size_t frame_bytes = ZSTD_findFrameCompressedSize(frame.data(), frame.size());
  if (ZSTD_isError(frame_bytes) || frame_bytes != frame.size()) {
    return BadBlock(format, "bytes after its zstd frame, or the frame is cut short");
  }
  std::string raw(raw_size, '\0');
  const size_t n = ZSTD_decompress(raw.data(), raw.size(), frame.data(), frame.size());
  if (ZSTD_isError(n) || n != raw_size) {
    return BadBlock(format,
                    absl::StrCat("zstd: ", ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short output"));
  }
  return raw;
}

}  // namespace stagefrontier::archive
