#include "daemon/web/query_string.h"

#include <catch2/catch.hpp>

namespace stagefrontier {
namespace {

TEST_CASE("query strings decode %-escapes and +, keep empty values") {
  auto p = ParseQueryString("job=a%20b+c&to=9&flag&=x&&empty=");
  REQUIRE(p.ok());
  CHECK(p->at("job") == "a b c");
  CHECK(p->at("to") == "9");
  CHECK(p->at("flag").empty());
  CHECK(p->at("").empty() == false);  // "=x": an empty name is kept as such
  CHECK(p->at("empty").empty());
  CHECK(p->size() == 5);
  auto bytes = ParseQueryString("b=%00%ff%2F");
  REQUIRE(bytes.ok());
  CHECK(bytes->at("b") == std::string("\0\xff/", 3));
  CHECK(ParseQueryString("")->empty());
}

TEST_CASE("bad escapes and repeated parameters are refused, saying where") {
  for (const char* bad : {"a=%", "a=%4", "a=%zz", "a=%4g", "%=1"}) {
    auto p = ParseQueryString(bad);
    INFO(bad);
    REQUIRE_FALSE(p.ok());
    CHECK(p.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(p.status().message()), Catch::Contains("bad %-escape at character"));
  }
  auto twice = ParseQueryString("job=a&job=b");
  REQUIRE_FALSE(twice.ok());
  CHECK(twice.status().message() == "parameter job given twice");
}

}  // namespace
}  // namespace stagefrontier
