// The framing: a frame reads back as the record it holds, and any damage to it says why.
#include "daemon/journal/journal_frame.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "daemon/journal/crc32c.h"

namespace stagefrontier {
namespace {

v1::JournalRecord Closed(int64_t step) {
  v1::JournalRecord r;
  r.mutable_closed()->set_step(step);
  return r;
}

TEST_CASE("the file header is the magic, format 2 and a reserved word") {
  const std::string h = JournalFileHeader();
  REQUIRE(h.size() == kJournalHeaderBytes);
  CHECK(h.substr(0, 8) == "SFJOURNL");
  CHECK(LoadJournalLe32(h.data() + 8) == kJournalFormat);
  CHECK(LoadJournalLe32(h.data() + 12) == 0);
}

TEST_CASE("an appended frame reads back: sync word, CRC over length and payload") {
  const std::string payload = Closed(42).SerializeAsString();
  std::string bytes = JournalFileHeader();
  AppendJournalFrame(payload, &bytes);
  const char* frame = bytes.data() + kJournalHeaderBytes;
  CHECK(LoadJournalLe32(frame) == kJournalRecordSync);
  CHECK(LoadJournalLe32(frame + 8) == payload.size());
  CHECK(LoadJournalLe32(frame + 4) == Crc32c(frame + 8, 4 + payload.size()));
  v1::JournalRecord back;
  CHECK(ReadJournalFrame(bytes, kJournalHeaderBytes, &back) ==
        kJournalRecordHeaderBytes + payload.size());
  CHECK(back.closed().step() == 42);
  CHECK(ReadJournalFrame(bytes, bytes.size(), &back) == 0);  // past the end
}

// Ingest journals each accepted RankSteps without building a JournalRecord around it: the
// bytes must be exactly the record's, whatever the sizes (varint lengths of 1 to 3 bytes).
TEST_CASE("a RankSteps frame is byte for byte the frame of its JournalRecord") {
  for (size_t packed : {size_t{0}, size_t{1}, size_t{100}, size_t{200}, size_t{20'000}}) {
    INFO(packed << " packed bytes");
    v1::RankSteps rs;
    rs.set_job("job-a");
    rs.set_rank(7);
    rs.set_base_step(123'456);
    rs.set_count(3);
    rs.set_packed(std::string(packed, '\x5a'));
    if (packed == 100) rs.add_collectives()->set_step(123'457);
    v1::JournalRecord record;
    *record.mutable_ranks()->add_steps() = rs;
    std::string expected = "prefix";
    AppendJournalFrame(record.SerializeAsString(), &expected);
    std::string bytes = "prefix";
    AppendRankStepsFrame(rs, &bytes);
    CHECK(bytes == expected);
    v1::JournalRecord back;
    REQUIRE(ReadJournalFrame(bytes, 6, &back) == bytes.size() - 6);
    CHECK(back.SerializeAsString() == record.SerializeAsString());
  }
}

// What a reader holding part of a file must read to have the frame at an offset.
TEST_CASE("a frame's span by its header: the header first, then header and payload") {
  const std::string payload = Closed(42).SerializeAsString();
  std::string frame;
  AppendJournalFrame(payload, &frame);
  const size_t whole = kJournalRecordHeaderBytes + payload.size();
  CHECK(JournalFrameSpan(frame, 0) == whole);
  CHECK(JournalFrameSpan(frame.substr(0, kJournalRecordHeaderBytes), 0) == whole);
  // Too little to know: read a header's worth.
  CHECK(JournalFrameSpan("", 0) == kJournalRecordHeaderBytes);
  CHECK(JournalFrameSpan(frame.substr(0, 3), 0) == kJournalRecordHeaderBytes);
  CHECK(JournalFrameSpan(frame.substr(0, 7), 0) == kJournalRecordHeaderBytes);
  CHECK(JournalFrameSpan(frame, frame.size()) == kJournalRecordHeaderBytes);
  // No frame there: no sync word (seen from 4 bytes on), or a length out of range.
  std::string bad = frame;
  bad[0] ^= 1;
  CHECK(JournalFrameSpan(bad.substr(0, 4), 0) == 0);
  CHECK(JournalFrameSpan(bad, 0) == 0);
  for (uint32_t len : {0U, kMaxJournalRecordBytes + 1}) {
    bad = frame;
    std::memcpy(bad.data() + 8, &len, 4);
    CHECK(JournalFrameSpan(bad, 0) == 0);
  }
}

TEST_CASE("a damaged frame reads as none, and says why") {
  std::string bytes;
  AppendJournalFrame(Closed(1).SerializeAsString(), &bytes);
  v1::JournalRecord r;
  std::string why;
  CHECK(TryJournalFrame(bytes.substr(0, 5), 0, 2, &r, &why) == 0);
  CHECK(why == "an incomplete record header");
  std::string bad = bytes;
  bad[0] ^= 1;
  CHECK(TryJournalFrame(bad, 0, 2, &r, &why) == 0);
  CHECK(why == "no record sync word");
  bad = bytes;
  bad[bad.size() - 1] ^= 1;
  CHECK(TryJournalFrame(bad, 0, 2, &r, &why) == 0);
  CHECK(why == "a record failing its checksum");
  CHECK(TryJournalFrame(bytes.substr(0, bytes.size() - 1), 0, 2, &r, &why) == 0);
  CHECK_THAT(why, Catch::Contains("cut short"));
}

TEST_CASE("format 1 frames: length, CRC of the payload, payload") {
  const std::string payload = Closed(3).SerializeAsString();
  std::string bytes;
  PutJournalLe32(bytes, static_cast<uint32_t>(payload.size()));
  PutJournalLe32(bytes, Crc32c(payload.data(), payload.size()));
  bytes += payload;
  v1::JournalRecord r;
  std::string why;
  CHECK(TryJournalFrame(bytes, 0, 1, &r, &why) == JournalFrameHeaderBytes(1) + payload.size());
  CHECK(r.closed().step() == 3);
}

}  // namespace
}  // namespace stagefrontier
