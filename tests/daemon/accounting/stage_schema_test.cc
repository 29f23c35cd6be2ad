#include "daemon/accounting/stage_schema.h"

#include <catch2/catch.hpp>

namespace stagefrontier {
namespace {

TEST_CASE("parse and round-trip", "[stage_schema]") {
  absl::StatusOr<StageSchema> s =
      StageSchema::Parse("data:io,forward:compute,backward:mixed,grad_sync:sync,optimizer:compute");
  REQUIRE(s.ok());
  CHECK(s->size() == 5);
  CHECK(s->IsWait(2));
  CHECK(s->IsWait(3));
  CHECK_FALSE(s->IsWait(0));
  CHECK(s->FirstWaitStage() == 2u);
  CHECK(s->NextWaitStage(2) == 3u);
  CHECK_FALSE(s->NextWaitStage(3).has_value());
  CHECK(s->IsTail(4));
  CHECK_FALSE(s->IsTail(3));
  CHECK(s->Find("grad_sync") == 3u);
  CHECK(StageSchema::Parse(s->ToString())->ToString() == s->ToString());
}

TEST_CASE("schema errors name what is wrong", "[stage_schema]") {
  auto error = [](const char* text) {
    return std::string(StageSchema::Parse(text).status().message());
  };
  CHECK_THAT(error("data:io,data:compute"), Catch::Contains("\"data\" is declared twice"));
  CHECK_THAT(error("data:disk"), Catch::Contains("unknown stage kind \"disk\""));
  CHECK_THAT(error("data"), Catch::Contains("not name:kind"));
  CHECK_THAT(error("da ta:io"), Catch::Contains("character outside"));
  CHECK_THAT(error(":io"), Catch::Contains("has no name"));
  std::string many;
  for (int i = 0; i < 33; ++i) many += (i ? ",s" : "s") + std::to_string(i) + ":compute";
  CHECK_THAT(error(many.c_str()), Catch::Contains("at most 32"));
}

}  // namespace
}  // namespace stagefrontier
