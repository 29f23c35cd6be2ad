#include "daemon/captures/operator_report_render.h"

#include <catch2/catch.hpp>
#include <string>

namespace stagefrontier {
namespace {

OperatorReport Report(int32_t nested) {
  OperatorReport r;
  r.stage = "forward";
  r.suspect_rank = 2;
  r.reference_ranks = {0, 1};
  r.suspect_steps = 10;
  r.reference_steps = 20;
  r.stage_suspect_ns = 20e6;
  r.stage_reference_ns = 3.17e6;
  OperatorFinding parent;
  parent.path = "Block";
  parent.excess_ns = 16.1e6;
  parent.within = "Block";
  OperatorFinding child;
  child.path = "Block > aten::mm";
  child.excess_ns = 2.84e6;
  child.within = child.path;
  r.findings = {parent, child};
  r.explained_ns = 16.1e6;
  r.nested_findings = nested;
  return r;
}

// Issue 30, item 10: "the findings explain 18.94 ms of the stage's 16.83 ms per step".
TEST_CASE("the explain line says when nested findings were counted once") {
  const std::string text = RenderOperatorReportText(Report(1));
  CHECK(text.find("the findings explain 16.10 ms of the stage's 16.83 ms per step (1 finding "
                  "lies within another finding's call path: counted once)\n") != std::string::npos);
  CHECK(OperatorReportJson(Report(1))["explained_ns"] == 16.1e6);
}

TEST_CASE("without nested findings the explain line is as before") {
  const std::string text = RenderOperatorReportText(Report(0));
  CHECK(text.find("the findings explain 16.10 ms of the stage's 16.83 ms per step\n") !=
        std::string::npos);
  CHECK(text.find("counted once") == std::string::npos);
}

}  // namespace
}  // namespace stagefrontier
