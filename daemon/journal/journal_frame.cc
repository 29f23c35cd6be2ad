#include "daemon/journal/journal_frame.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/journal/crc32c.h"

namespace stagefrontier {

uint32_t LoadJournalLe32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

void PutJournalLe32(std::string& out, uint32_t v) {
  out.append(reinterpret_cast<const char*>(&v), 4);
}

std::string JournalFileHeader() {
  std::string h(kJournalMagic, sizeof(kJournalMagic));
  PutJournalLe32(h, kJournalFormat);
  PutJournalLe32(h, 0);
  return h;
}

size_t TryJournalFrame(absl::string_view data, size_t off, uint32_t format,
                       v1::JournalRecord* record, std::string* why) {
  const size_t header = JournalFrameHeaderBytes(format);
  const size_t left = data.size() - off;
  if (left < header) {
    *why = "an incomplete record header";
    return 0;
  }
  const char* p = data.data() + off;
  uint32_t len = 0;
  uint32_t crc = 0;
  if (format == 2) {
    if (LoadJournalLe32(p) != kJournalRecordSync) {
      *why = "no record sync word";
      return 0;
    }
    crc = LoadJournalLe32(p + 4);
    len = LoadJournalLe32(p + 8);
  } else {
    len = LoadJournalLe32(p);
    crc = LoadJournalLe32(p + 4);
  }
  if (len == 0 || len > kMaxJournalRecordBytes) {
    *why = absl::StrCat("a record claiming ", len, " bytes");
    return 0;
  }
  if (left - header < len) {
    *why = absl::StrCat("a record cut short (", len, " bytes wanted, ", left - header, " there)");
    return 0;
  }
  // Format 2 checks the length too (it sits right before the payload).
  const uint32_t actual =
      format == 2 ? Crc32c(p + 8, 4 + static_cast<size_t>(len)) : Crc32c(p + header, len);
  if (actual != crc) {
    *why = "a record failing its checksum";
    return 0;
  }
  if (!record->ParseFromArray(p + header, static_cast<int>(len)) ||
      record->body_case() == v1::JournalRecord::BODY_NOT_SET) {
    *why = "a record that is not a JournalRecord";
    return 0;
  }
  return header + len;
}

size_t ReadJournalFrame(absl::string_view data, size_t offset, v1::JournalRecord* record) {
  if (offset >= data.size()) return 0;
  std::string why;
  return TryJournalFrame(data, offset, kJournalFormat, record, &why);
}

void AppendJournalFrame(absl::string_view payload, std::string* out) {
  PutJournalLe32(*out, kJournalRecordSync);
  std::string len;
  PutJournalLe32(len, static_cast<uint32_t>(payload.size()));
  // CRC over the length bytes then the payload.
  std::string covered = len;
  covered.append(payload.data(), payload.size());
  PutJournalLe32(*out, Crc32c(covered.data(), covered.size()));
  out->append(len);
  out->append(payload.data(), payload.size());
}

}  // namespace stagefrontier
