// CRC-32C (Castagnoli), the checksum of the journal's records.
//
//   uint32_t c = Crc32c(payload.data(), payload.size());
//
// With the CPU's CRC32 instruction (SSE4.2) where it has one, checked at the first call; the
// table-driven code otherwise. Both give the same value.
#ifndef STAGEFRONTIER_DAEMON_JOURNAL_CRC32C_H_
#define STAGEFRONTIER_DAEMON_JOURNAL_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace stagefrontier {

// Returns the CRC-32C of `size` bytes at `data` (0xE3069283 for "123456789").
uint32_t Crc32c(const void* data, size_t size);

// The two ways, for tests: slicing-by-8 tables, and the CRC32 instruction (false from
// Crc32cHardware when this CPU lacks it; *out then unset).
uint32_t Crc32cTables(const void* data, size_t size);
bool Crc32cHardware(const void* data, size_t size, uint32_t* out);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_JOURNAL_CRC32C_H_
