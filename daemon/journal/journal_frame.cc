#include "daemon/journal/journal_frame.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/journal/crc32c.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"

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

size_t JournalFrameSpan(absl::string_view data, size_t offset) {
  const size_t held = offset < data.size() ? data.size() - offset : 0;
  if (held < 4) return kJournalRecordHeaderBytes;
  const char* p = data.data() + offset;
  if (LoadJournalLe32(p) != kJournalRecordSync) return 0;
  if (held < kJournalRecordHeaderBytes) return kJournalRecordHeaderBytes;
  const uint32_t len = LoadJournalLe32(p + 8);
  if (len == 0 || len > kMaxJournalRecordBytes) return 0;
  return kJournalRecordHeaderBytes + len;
}

namespace {

// A format-2 frame is built in place at the end of *out: its header (the CRC left 0), then
// the caller appends `payload_bytes` of payload, then SealFrame checksums them where they lie
// (a block's payload is megabytes: copying it to checksum it cost an allocation and a copy).
size_t BeginFrame(uint32_t payload_bytes, std::string* out) {
  const size_t frame = out->size();
  PutJournalLe32(*out, kJournalRecordSync);
  PutJournalLe32(*out, 0);
  PutJournalLe32(*out, payload_bytes);
  return frame;
}

// The CRC of the frame at `frame`, whose payload runs to the end of *out: over the length
// bytes then the payload.
void SealFrame(size_t frame, std::string* out) {
  const size_t covered = out->size() - frame - 8;
  const uint32_t crc = Crc32c(out->data() + frame + 8, covered);
  std::memcpy(out->data() + frame + 4, &crc, 4);
}

}  // namespace

void AppendJournalFrame(absl::string_view payload, std::string* out) {
  const size_t frame = BeginFrame(static_cast<uint32_t>(payload.size()), out);
  out->append(payload.data(), payload.size());
  SealFrame(frame, out);
}

void AppendRankStepsFrame(const v1::RankSteps& steps, std::string* out) {
  using google::protobuf::internal::WireFormatLite;
  using google::protobuf::io::CodedOutputStream;
  // JournalRecord.ranks (a RanksLogged) holding RanksLogged.steps (one RankSteps): each a
  // length-delimited field, as the generated serializer writes a message with one field set.
  const uint32_t ranks_tag = WireFormatLite::MakeTag(v1::JournalRecord::kRanksFieldNumber,
                                                     WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
  const uint32_t steps_tag = WireFormatLite::MakeTag(v1::RanksLogged::kStepsFieldNumber,
                                                     WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
  const size_t steps_bytes = steps.ByteSizeLong();  // caches the sizes the write below uses
  const size_t ranks_bytes = CodedOutputStream::VarintSize32(steps_tag) +
                             CodedOutputStream::VarintSize64(steps_bytes) + steps_bytes;
  const size_t payload = CodedOutputStream::VarintSize32(ranks_tag) +
                         CodedOutputStream::VarintSize64(ranks_bytes) + ranks_bytes;
  const size_t frame = BeginFrame(static_cast<uint32_t>(payload), out);
  const size_t at = out->size();
  out->resize(at + payload);
  auto* p = reinterpret_cast<uint8_t*>(out->data() + at);
  p = CodedOutputStream::WriteVarint32ToArray(ranks_tag, p);
  p = CodedOutputStream::WriteVarint64ToArray(ranks_bytes, p);
  p = CodedOutputStream::WriteVarint32ToArray(steps_tag, p);
  p = CodedOutputStream::WriteVarint64ToArray(steps_bytes, p);
  steps.SerializeWithCachedSizesToArray(p);
  SealFrame(frame, out);
}

}  // namespace stagefrontier
