#include "daemon/journal/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace stagefrontier {
namespace {

// Slicing-by-8 tables for the reflected polynomial 0x82F63B78.
constexpr std::array<std::array<uint32_t, 256>, 8> MakeTables() {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78U : c >> 1;
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i) {
    for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  }
  return t;
}
constexpr auto kTables = MakeTables();

#if defined(__x86_64__)
// The journal checksums every record it appends and reads: the instruction is several times
// faster than the tables (tests/bench:crc32c_benchmark).
__attribute__((target("sse4.2"))) uint32_t Crc32cSse42(const uint8_t* p, size_t size) {
  uint64_t c = 0xFFFFFFFFU;
  while (size >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    size -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (size-- > 0) c32 = _mm_crc32_u8(c32, *p++);
  return ~c32;
}

bool HasSse42() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

}  // namespace

bool Crc32cHardware(const void* data, size_t size, uint32_t* out) {
#if defined(__x86_64__)
  if (!HasSse42()) return false;
  *out = Crc32cSse42(static_cast<const uint8_t*>(data), size);
  return true;
#else
  (void)data;
  (void)size;
  (void)out;
  return false;
#endif
}

uint32_t Crc32c(const void* data, size_t size) {
  uint32_t c;
  if (Crc32cHardware(data, size, &c)) return c;
  return Crc32cTables(data, size);
}

uint32_t Crc32cTables(const void* data, size_t size) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~0U;
  while (size >= 8) {
    const uint32_t lo =
        c ^ (uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24);
    c = kTables[7][lo & 0xff] ^ kTables[6][(lo >> 8) & 0xff] ^ kTables[5][(lo >> 16) & 0xff] ^
        kTables[4][lo >> 24] ^ kTables[3][p[4]] ^ kTables[2][p[5]] ^ kTables[1][p[6]] ^
        kTables[0][p[7]];
    p += 8;
    size -= 8;
  }
  while (size-- > 0) c = (c >> 8) ^ kTables[0][(c ^ *p++) & 0xff];
  return ~c;
}

}  // namespace stagefrontier
