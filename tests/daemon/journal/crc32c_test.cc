// CRC-32C, the checksum of the record log's frames.
#include "daemon/journal/crc32c.h"

#include <catch2/catch.hpp>

namespace stagefrontier {
namespace {

TEST_CASE("CRC-32C known answer") { CHECK(Crc32c("123456789", 9) == 0xE3069283U); }

}  // namespace
}  // namespace stagefrontier
