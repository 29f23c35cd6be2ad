#include "shm/stage_schema.h"

#include <catch2/catch.hpp>
#include <vector>

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

TEST_CASE("p2p stages (pipeline sends and receives) are the rank's own time, not waits",
          "[stage_schema]") {
  absl::StatusOr<StageSchema> s =
      StageSchema::Parse("recv_act:p2p,fwd:compute,send_act:p2p,dp_sync:sync,apply:compute");
  REQUIRE(s.ok());
  CHECK(s->stage(0).kind == StageKind::kP2p);
  CHECK_FALSE(s->IsWait(0));
  CHECK_FALSE(s->IsWait(2));
  CHECK(s->FirstWaitStage() == 3u);
  CHECK(s->ToString() == "recv_act:p2p,fwd:compute,send_act:p2p,dp_sync:sync,apply:compute");
  CHECK(std::string(StageKindName(StageKind::kP2p)) == "p2p");
  CHECK_THAT(std::string(StageSchema::Parse("x:peer").status().message()),
             Catch::Contains("(expected io, compute, sync, mixed, p2p or tensor)"));
}

TEST_CASE("tensor stages wait outside the group and are own work; p2p and waits are not",
          "[stage_schema]") {
  absl::StatusOr<StageSchema> s =
      StageSchema::Parse("data:io,fwd:tensor,send:p2p,grad:mixed,dp_sync:sync,apply:compute");
  REQUIRE(s.ok());
  CHECK(s->stage(1).kind == StageKind::kTensor);
  CHECK(s->ToString() == "data:io,fwd:tensor,send:p2p,grad:mixed,dp_sync:sync,apply:compute");
  const std::vector<bool> work = {true, true, false, false, false, true};
  const std::vector<bool> outside = {false, true, true, false, false, false};
  const std::vector<bool> wait = {false, false, false, true, true, false};
  for (size_t k = 0; k < s->size(); ++k) {
    CHECK(s->IsWork(k) == work[k]);
    CHECK(s->WaitsOutsideGroup(k) == outside[k]);
    CHECK(s->IsWait(k) == wait[k]);
  }
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

namespace stagefrontier {
namespace {

// Regression (hostile input): a 10,000-character stage name was accepted by the coordinator
// (it becomes a metric label), and newlines or NUL bytes went raw into messages and logs.
TEST_CASE("stage names are bounded and escaped in errors", "[stage_schema]") {
  std::vector<Stage> stages = {{std::string(10'000, 'x'), StageKind::kIo}};
  absl::Status s = StageSchema::Create(stages).status();
  CHECK_THAT(std::string(s.message()), Catch::Contains("10000 characters; at most 39"));
  CHECK(s.message().size() < 200);
  CHECK(StageSchema::Create({{std::string(39, 'a'), StageKind::kIo}}).ok());
  CHECK_FALSE(StageSchema::Create({{std::string(40, 'a'), StageKind::kIo}}).ok());

  const std::string forged = std::string("data\n[error] forged", 19) + std::string(1, '\0');
  s = StageSchema::Create({{forged, StageKind::kIo}}).status();
  const std::string message(s.message());
  CHECK(message.find('\n') == std::string::npos);
  CHECK(message.find('\0') == std::string::npos);
  CHECK_THAT(message, Catch::Contains("data\\n[error] forged\\x00"));
}

}  // namespace
}  // namespace stagefrontier
