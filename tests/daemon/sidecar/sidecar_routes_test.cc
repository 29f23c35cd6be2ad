// --route JOB=ADDRESS parsing: what is accepted, and each refusal names what is wrong.
#include "daemon/sidecar/sidecar_routes.h"

#include <catch2/catch.hpp>

namespace stagefrontier {
namespace {

TEST_CASE("routes are parsed in order") {
  auto r = ParseRoutes({"jobA=10.0.0.1:7311", "run-42.b=[::1]:9000"});
  REQUIRE(r.ok());
  REQUIRE(r->size() == 2);
  CHECK((*r)[0].job == "jobA");
  CHECK((*r)[0].coordinator == "10.0.0.1:7311");
  CHECK((*r)[1].job == "run-42.b");
  CHECK((*r)[1].coordinator == "[::1]:9000");
  CHECK(ParseRoutes({})->empty());
}

TEST_CASE("bad routes are refused with what is wrong") {
  const auto message = [](const std::vector<std::string>& flags) {
    auto r = ParseRoutes(flags);
    REQUIRE(!r.ok());
    CHECK(absl::IsInvalidArgument(r.status()));
    return std::string(r.status().message());
  };
  CHECK(message({"jobA"}).find("is not JOB=ADDRESS") != std::string::npos);
  CHECK(message({"=host:1"}).find("is not JOB=ADDRESS") != std::string::npos);
  CHECK(message({"jobA="}).find("is not JOB=ADDRESS") != std::string::npos);
  CHECK(message({"a/b=host:1"}).find("not a job id") != std::string::npos);
  CHECK(message({"jobA=h:1", "jobA=h:2"}).find("routed twice") != std::string::npos);
}

}  // namespace
}  // namespace stagefrontier
