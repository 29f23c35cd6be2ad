// sfctl's output cannot drive the terminal: control characters from others become '?'.
#include "daemon/sfctl/terminal_safe.h"

#include <catch2/catch.hpp>
#include <ostream>
#include <sstream>

namespace stagefrontier {
namespace {

std::string Shown(const std::string& text, bool by_char = false) {
  std::ostringstream sink;
  {
    TerminalSafeBuf safe(sink.rdbuf());
    std::ostream out(&safe);
    if (by_char) {
      for (char c : text) out.put(c);
    } else {
      out << text;
    }
  }
  return sink.str();
}

// Regression: a node name a sidecar sent (or a relayed error) reached the terminal as it was:
// "\x1b]0;title\x07" set the window title, "\x1b[2J" cleared the screen.
TEST_CASE("control characters become '?'; text, tables and UTF-8 pass unchanged") {
  for (bool by_char : {false, true}) {
    CHECK(Shown("node \x1b]0;owned\x07 end\n", by_char) == "node ?]0;owned? end\n");
    CHECK(Shown("a\tb\r\nc\x7f\x01", by_char) == "a\tb\r\nc??");
    CHECK(Shown("C1 \xc2\x9b"
                "2J",
                by_char) == "C1 ?2J");  // CSI as UTF-8
    CHECK(Shown("caf\xc3\xa9 \xc2\xa0nbsp", by_char) == "caf\xc3\xa9 \xc2\xa0nbsp");
    CHECK(Shown("{\"job\": \"j\"}\n", by_char) == "{\"job\": \"j\"}\n");
    CHECK(Shown("ends with \xc2", by_char) == "ends with \xc2");  // held, then given back
  }
}

}  // namespace
}  // namespace stagefrontier
