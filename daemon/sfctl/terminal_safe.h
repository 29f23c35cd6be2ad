// What sfctl prints cannot drive the terminal it prints to: text it shows comes from others
// (node names a sidecar sent, a slot's last error, capture reasons), and a control character
// in it could move the cursor, rewrite earlier lines or set the window title. A stream buffer
// in front of standard output and standard error turns C0 controls other than newline, tab
// and carriage return, DEL, and C1 controls (as UTF-8 encodes them) into '?'; everything
// else passes unchanged, so sfctl's own tables and JSON read as before.
//
//   TerminalSafeBuf out(std::cout.rdbuf());
//   std::cout.rdbuf(&out);  // ... and back before `out` goes
#ifndef STAGEFRONTIER_DAEMON_SFCTL_TERMINAL_SAFE_H_
#define STAGEFRONTIER_DAEMON_SFCTL_TERMINAL_SAFE_H_

#include <streambuf>

namespace stagefrontier {

class TerminalSafeBuf : public std::streambuf {
 public:
  explicit TerminalSafeBuf(std::streambuf* to) : to_(to) {}
  ~TerminalSafeBuf() override { sync(); }

 protected:
  int_type overflow(int_type ch) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;

 private:
  // Writes one byte as it is shown; false when the buffer behind refused it.
  bool Put(unsigned char c);
  std::streambuf* to_;
  bool lead_c2_ = false;  // the last byte was 0xC2, held until the next says whether it is C1
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SFCTL_TERMINAL_SAFE_H_
