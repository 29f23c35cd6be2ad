#include "daemon/sfctl/terminal_safe.h"

namespace stagefrontier {

bool TerminalSafeBuf::Put(unsigned char c) {
  using traits = std::char_traits<char>;
  if (lead_c2_) {
    lead_c2_ = false;
    if (c >= 0x80 && c <= 0x9F) return !traits::eq_int_type(to_->sputc('?'), traits::eof());
    if (traits::eq_int_type(to_->sputc('\xC2'), traits::eof())) return false;
  }
  if (c == 0xC2) {
    lead_c2_ = true;
    return true;
  }
  const bool control = (c < 0x20 && c != '\n' && c != '\t' && c != '\r') || c == 0x7F;
  return !traits::eq_int_type(to_->sputc(control ? '?' : static_cast<char>(c)), traits::eof());
}

TerminalSafeBuf::int_type TerminalSafeBuf::overflow(int_type ch) {
  if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
  return Put(static_cast<unsigned char>(traits_type::to_char_type(ch))) ? ch : traits_type::eof();
}

std::streamsize TerminalSafeBuf::xsputn(const char* s, std::streamsize n) {
  for (std::streamsize i = 0; i < n; ++i) {
    if (!Put(static_cast<unsigned char>(s[i]))) return i;
  }
  return n;
}

int TerminalSafeBuf::sync() {
  if (lead_c2_) {  // a lone 0xC2 at the end: not a C1 control
    lead_c2_ = false;
    if (traits_type::eq_int_type(to_->sputc('\xC2'), traits_type::eof())) return -1;
  }
  return to_->pubsync();
}

}  // namespace stagefrontier
