// CRC-32C, the checksum of the record log's frames.
#include "daemon/journal/crc32c.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>

namespace stagefrontier {
namespace {

TEST_CASE("CRC-32C known answer") {
  CHECK(Crc32c("123456789", 9) == 0xE3069283U);
  CHECK(Crc32cTables("123456789", 9) == 0xE3069283U);
  uint32_t hw = 0;
  if (Crc32cHardware("123456789", 9, &hw)) CHECK(hw == 0xE3069283U);
  CHECK(Crc32c("", 0) == 0);
}

// Journals written on one machine are read on another: the instruction and the tables must
// agree at every length and alignment.
TEST_CASE("CRC-32C: the CRC32 instruction and the tables agree") {
  std::mt19937_64 rng(29);
  std::string bytes(4096 + 8, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  uint32_t probe = 0;
  if (!Crc32cHardware(bytes.data(), 1, &probe)) {
    WARN("this CPU has no CRC32 instruction: the tables alone are checked");
    return;
  }
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t size : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{15},
                        size_t{16}, size_t{63}, size_t{160}, size_t{1000}, size_t{4096}}) {
      INFO("offset " << offset << ", " << size << " bytes");
      uint32_t hw = 0;
      REQUIRE(Crc32cHardware(bytes.data() + offset, size, &hw));
      CHECK(hw == Crc32cTables(bytes.data() + offset, size));
      CHECK(Crc32c(bytes.data() + offset, size) == hw);
    }
  }
}

}  // namespace
}  // namespace stagefrontier
