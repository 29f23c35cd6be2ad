#include "daemon/common/duration_format.h"

#include <catch2/catch.hpp>
#include <cstdint>

namespace stagefrontier {
namespace {

TEST_CASE("FormatMs: milliseconds with two decimals and the unit") {
  CHECK(FormatMs(12'345'678) == "12.35 ms");
  CHECK(FormatMs(0) == "0.00 ms");
  CHECK(FormatMs(4'999) == "0.00 ms");
  CHECK(FormatMs(5'001) == "0.01 ms");
  CHECK(FormatMs(-2'500'000) == "-2.50 ms");
  CHECK(FormatMs(1.5e12) == "1500000.00 ms");
}

TEST_CASE("FormatMsNumber: the same number without the unit") {
  CHECK(FormatMsNumber(12'345'678) == "12.35");
  CHECK(FormatMsNumber(0.0) == "0.00");
  CHECK(FormatMsNumber(-2'500'000) == "-2.50");
}

TEST_CASE("an int64_t count of nanoseconds prints as its double does") {
  const int64_t ns = 987'654'321;
  CHECK(FormatMs(ns) == "987.65 ms");
  CHECK(FormatMs(static_cast<double>(ns)) == FormatMs(ns));
}

}  // namespace
}  // namespace stagefrontier
