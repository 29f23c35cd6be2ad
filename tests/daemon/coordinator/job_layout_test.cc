// Sync groups from declared layouts: the roles of a pipeline x tensor x data-parallel job, a
// job that declares nothing, ranks still to declare, and every way declarations can disagree
// (each refused with the ranks named).
#include "daemon/coordinator/job_layout.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace stagefrontier {
namespace {

using Groups = std::vector<std::vector<int32_t>>;

// Rank r of a P-stage pipeline of T-wide tensor groups and D replicas, Megatron's order
// (tensor fastest, then data, then pipeline).
std::vector<DeclaredLayout> Megatron(int32_t p, int32_t t, int32_t d) {
  std::vector<DeclaredLayout> out;
  for (int32_t r = 0; r < p * t * d; ++r) {
    out.push_back(DeclaredLayout::Of(p, r / (t * d), r % t, t));
  }
  return out;
}

std::string Refusal(const std::vector<DeclaredLayout>& by_rank) {
  absl::StatusOr<LayoutGroups> g = GroupsFromLayout(by_rank);
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(g.status().message());
}

TEST_CASE("a pipeline of 2 stages x 2 replicas is two groups, one per stage") {
  absl::StatusOr<LayoutGroups> g = GroupsFromLayout(Megatron(2, 1, 2));
  REQUIRE(g.ok());
  CHECK_FALSE(g->pending);
  CHECK(g->groups == Groups{{0, 1}, {2, 3}});
  CHECK(g->names == std::vector<std::string>{"pp0", "pp1"});
}

TEST_CASE("with tensor parallelism a group is one (pipeline stage, tensor rank)") {
  absl::StatusOr<LayoutGroups> g = GroupsFromLayout(Megatron(2, 2, 2));
  REQUIRE(g.ok());
  CHECK(g->groups == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(g->names == std::vector<std::string>{"pp0.tp0", "pp0.tp1", "pp1.tp0", "pp1.tp1"});
}

TEST_CASE("nothing declared, or one role, is one group as before layouts") {
  std::vector<DeclaredLayout> none(4, DeclaredLayout::None());
  absl::StatusOr<LayoutGroups> g = GroupsFromLayout(none);
  REQUIRE(g.ok());
  CHECK_FALSE(g->pending);
  CHECK(g->groups.empty());
  g = GroupsFromLayout(Megatron(1, 1, 4));  // pure data parallel, declared
  REQUIRE(g.ok());
  CHECK(g->groups.empty());
}

TEST_CASE("ranks still to declare keep the groups pending") {
  std::vector<DeclaredLayout> some = Megatron(2, 1, 2);
  some[3] = DeclaredLayout{};
  absl::StatusOr<LayoutGroups> g = GroupsFromLayout(some);
  REQUIRE(g.ok());
  CHECK(g->pending);
  std::vector<DeclaredLayout> nobody(4);
  g = GroupsFromLayout(nobody);
  REQUIRE(g.ok());
  CHECK(g->pending);
  CHECK(g->groups.empty());
}

TEST_CASE("declarations that do not fit together are refused with the ranks named") {
  std::vector<DeclaredLayout> mixed = Megatron(2, 1, 2);
  mixed[2] = DeclaredLayout::None();
  mixed[3] = DeclaredLayout::None();
  CHECK_THAT(Refusal(mixed), Catch::Contains("ranks 0, 1 declared a layout, ranks 2, 3 none"));

  std::vector<DeclaredLayout> sizes = Megatron(2, 1, 2);
  sizes[3] = DeclaredLayout::Of(4, 3, 0, 1);
  CHECK_THAT(Refusal(sizes), Catch::Contains("ranks 3 other sizes"));

  std::vector<DeclaredLayout> outside = Megatron(2, 1, 2);
  outside[1] = DeclaredLayout::Of(2, 2, 0, 1);
  CHECK_THAT(Refusal(outside), Catch::Contains("ranks 1 declared a pipeline stage or tensor rank "
                                               "outside"));

  std::vector<DeclaredLayout> three(3);
  for (int32_t r = 0; r < 3; ++r) three[r] = DeclaredLayout::Of(2, r % 2, 0, 1);
  CHECK_THAT(Refusal(three), Catch::Contains("do not divide the world of 3 ranks"));

  std::vector<DeclaredLayout> uneven = Megatron(2, 1, 2);
  uneven[1] = DeclaredLayout::Of(2, 1, 0, 1);  // stage 1 has 3 ranks, stage 0 one
  CHECK_THAT(Refusal(uneven),
             Catch::Contains("pipeline stage 0 tensor rank 0 has 1 ranks (0), every role must "
                             "have 2"));

  std::vector<DeclaredLayout> zero(2, DeclaredLayout::Of(0, 0, 0, 0));
  CHECK_THAT(Refusal(zero), Catch::Contains("both must be at least 1"));
}

TEST_CASE("a refusal is given even while other ranks are still to declare") {
  std::vector<DeclaredLayout> by_rank(8);
  by_rank[0] = DeclaredLayout::Of(2, 0, 0, 1);
  by_rank[5] = DeclaredLayout::Of(3, 0, 0, 1);
  CHECK_THAT(Refusal(by_rank), Catch::Contains("ranks 5 other sizes"));
}

TEST_CASE("SameShape: what a later declaration must match to leave the outcome unchanged") {
  const DeclaredLayout ref = DeclaredLayout::Of(2, 0, 0, 1);
  CHECK(SameShape(DeclaredLayout::Of(2, 1, 0, 1), ref));
  CHECK_FALSE(SameShape(DeclaredLayout::Of(4, 1, 0, 1), ref));  // another pipeline size
  CHECK_FALSE(SameShape(DeclaredLayout::Of(2, 2, 0, 1), ref));  // outside the sizes
  CHECK_FALSE(SameShape(DeclaredLayout::Of(2, 0, 0, 2), ref));  // another tensor size
  CHECK_FALSE(SameShape(DeclaredLayout::None(), ref));
  CHECK(SameShape(DeclaredLayout::None(), DeclaredLayout::None()));
}

TEST_CASE("16,384 ranks in 2,048 groups; an error names at most 8 ranks") {
  absl::StatusOr<LayoutGroups> g = GroupsFromLayout(Megatron(256, 8, 8));
  REQUIRE(g.ok());
  REQUIRE(g->groups.size() == 2048);
  for (const auto& group : g->groups) CHECK(group.size() == 8);
  std::vector<DeclaredLayout> bad = Megatron(256, 8, 8);
  for (size_t r = 100; r < 200; ++r) bad[r] = DeclaredLayout::Of(128, 0, 0, 8);
  CHECK_THAT(Refusal(bad), Catch::Contains("107 and 92 more other sizes"));
}

}  // namespace
}  // namespace stagefrontier
