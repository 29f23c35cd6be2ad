// Names cut to a bound stay UTF-8, so that the replies carrying them still parse.
#include "daemon/common/utf8_prefix.h"

#include <catch2/catch.hpp>

#include "stagefrontier/v1/query.pb.h"

namespace stagefrontier {
namespace {

TEST_CASE("a cut never splits a character") {
  CHECK(Utf8Prefix("node1", 256) == "node1");
  CHECK(Utf8Prefix("abcdef", 3) == "abc");
  const std::string e = "\xc3\xa9";             // é: 2 bytes
  const std::string euro = "\xe2\x82\xac";      // €: 3 bytes
  const std::string clef = "\xf0\x9d\x84\x9e";  // 𝄞: 4 bytes
  CHECK(Utf8Prefix("ab" + e, 3) == "ab");
  CHECK(Utf8Prefix("ab" + e, 4) == "ab" + e);
  CHECK(Utf8Prefix("a" + euro, 2) == "a");
  CHECK(Utf8Prefix("a" + euro, 3) == "a");
  CHECK(Utf8Prefix("a" + clef, 4) == "a");
  CHECK(Utf8Prefix("a" + clef + "z", 5) == "a" + clef);
  CHECK(Utf8Prefix(e + e, 1).empty());
  // Not UTF-8: at most 3 bytes go back.
  CHECK(Utf8Prefix(std::string(8, '\x80'), 6).size() == 3);
}

// Regression: node names and messages were cut with substr(0, N); a name of 255 ASCII bytes
// and an "é" became a string no proto3 parser takes, and the reply carrying it was lost.
TEST_CASE("a cut name still parses in a reply") {
  const std::string name = std::string(255, 'n') + "\xc3\xa9";
  v1::RankHealth r;
  r.set_node(Utf8Prefix(name, 256));
  v1::RankHealth back;
  CHECK(back.ParseFromString(r.SerializeAsString()));
  CHECK(back.node() == std::string(255, 'n'));
  r.set_node(name.substr(0, 256));  // the old cut
  CHECK_FALSE(back.ParseFromString(r.SerializeAsString()));
}

}  // namespace
}  // namespace stagefrontier
