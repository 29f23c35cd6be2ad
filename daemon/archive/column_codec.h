// The pieces the archive's block formats share (record blocks, summary blocks): columns of
// varints stored as (length, bytes) pairs, and a zstd frame carrying its content checksum.
// Every error is InvalidArgument and starts with the format's name ("record block: ...").
//
//   std::array<std::string, 3> cols;  wire::PutVarint(cols[0], 7); ...
//   std::string raw;  AppendColumns(cols, &raw);
//   std::string block;  absl::Status s = AppendZstdFrame(raw, 3, "summary block", &block);
//   absl::StatusOr<std::string> back = DecompressZstdFrame(block, raw.size(), "summary block");
//   std::array<ColumnReader, 3> in;
//   s = SplitColumns(*back, {"a", "b", "c"}, "summary block", in);
#ifndef STAGEFRONTIER_DAEMON_ARCHIVE_COLUMN_CODEC_H_
#define STAGEFRONTIER_DAEMON_ARCHIVE_COLUMN_CODEC_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

// Returns the status of `expr` from the enclosing function when it is not OK.
#define SF_RETURN_IF_ERROR(expr)       \
  do {                                 \
    absl::Status _status = (expr);     \
    if (!_status.ok()) return _status; \
  } while (0)

namespace stagefrontier::archive {

// InvalidArgument "<format>: <what>".
absl::Status BadBlock(const char* format, absl::string_view what);

// Reads one column's values in order. Never reads outside the column.
class ColumnReader {
 public:
  ColumnReader() = default;
  ColumnReader(absl::string_view bytes, const char* format, const char* name)
      : p_(bytes.data()), end_(bytes.data() + bytes.size()), format_(format), name_(name) {}

  // Reads a varint; fails when the column ends first.
  [[nodiscard]] absl::Status Varint(uint64_t* v);
  // Reads a zigzag varint.
  [[nodiscard]] absl::Status Signed(int64_t* v);
  // Takes the next `n` bytes; fails when fewer are left.
  [[nodiscard]] absl::Status Bytes(uint64_t n, absl::string_view* out);
  size_t left() const { return static_cast<size_t>(end_ - p_); }
  // Fails when bytes are left over (a column longer than its values).
  [[nodiscard]] absl::Status Done() const;

 private:
  const char* p_ = nullptr;
  const char* end_ = nullptr;
  const char* format_ = "";
  const char* name_ = "";
};

// Appends each column as varint(length) then its bytes.
void AppendColumns(std::span<const std::string> columns, std::string* raw);

// Splits `raw` (as AppendColumns wrote it) into `out.size()` columns named `names`; fails when
// a column is cut short or bytes follow the last.
[[nodiscard]] absl::Status SplitColumns(absl::string_view raw, std::span<const char* const> names,
                                        const char* format, std::span<ColumnReader> out);

// Appends `raw` compressed as one zstd frame with its content size and checksum, so that damage
// a file's own checks miss is found rather than decoded into other numbers. Fails (Internal)
// only when zstd does.
[[nodiscard]] absl::Status AppendZstdFrame(absl::string_view raw, int level, const char* format,
                                           std::string* out);

// Decompresses `frame`, which must be exactly one zstd frame holding `raw_size` bytes with an
// intact checksum; fails naming what is wrong otherwise. The caller bounds `raw_size` first.
[[nodiscard]] absl::StatusOr<std::string> DecompressZstdFrame(absl::string_view frame,
                                                              uint64_t raw_size,
                                                              const char* format);

}  // namespace stagefrontier::archive

#endif  // STAGEFRONTIER_DAEMON_ARCHIVE_COLUMN_CODEC_H_
