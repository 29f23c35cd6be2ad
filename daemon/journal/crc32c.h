// CRC-32C (Castagnoli), the checksum of the journal's records.
//
//   uint32_t c = Crc32c(payload.data(), payload.size());
#ifndef STAGEFRONTIER_DAEMON_JOURNAL_CRC32C_H_
#define STAGEFRONTIER_DAEMON_JOURNAL_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace stagefrontier {

// Returns the CRC-32C of `size` bytes at `data` (0xE3069283 for "123456789").
uint32_t Crc32c(const void* data, size_t size);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_JOURNAL_CRC32C_H_
