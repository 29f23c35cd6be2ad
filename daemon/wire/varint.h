// Base-128 varints and zigzag, as protobuf writes them: the building blocks of the packed
// step vectors (packed_steps.h) and the journal's record blocks (daemon/archive).
//
//   std::string out; PutVarint(out, ZigZag(-3));
//   const char* p = out.data(); uint64_t v;
//   if (GetVarint(p, out.data() + out.size(), &v)) use(UnZigZag(v));
#ifndef STAGEFRONTIER_DAEMON_WIRE_VARINT_H_
#define STAGEFRONTIER_DAEMON_WIRE_VARINT_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace stagefrontier::wire {

// Writes `v` at `p` (room for kMaxVarintBytes); returns the end.
inline char* WriteVarint(char* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}
inline constexpr size_t kMaxVarintBytes = 10;

inline void PutVarint(std::string& out, uint64_t v) {
  char buf[kMaxVarintBytes];
  out.append(buf, static_cast<size_t>(WriteVarint(buf, v) - buf));
}

inline uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ (v < 0 ? ~0ULL : 0ULL);
}
inline int64_t UnZigZag(uint64_t v) { return static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1)); }

// Reads one varint at `p` (advancing it); false if truncated or longer than 10 bytes / 64 bits.
inline bool GetVarint(const char*& p, const char* end, uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    const uint8_t byte = static_cast<uint8_t>(*p++);
    if (shift == 63 && byte > 1) return false;
    result |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      *v = result;
      return true;
    }
  }
  return false;
}

}  // namespace stagefrontier::wire

#endif  // STAGEFRONTIER_DAEMON_WIRE_VARINT_H_
