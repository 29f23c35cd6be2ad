#include "daemon/captures/operator_report_render.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/common/duration_format.h"

namespace stagefrontier {
std::string RenderOperatorReportText(const OperatorReport& r) {
  std::string out = absl::StrFormat(
      "operators of stage \"%s\": suspect rank %d (%d steps) against ranks %s (%d rank-steps)\n"
      "stage per step: %s on the suspect, %s on the references (%+.2f ms)\n",
      r.stage, r.suspect_rank, r.suspect_steps, absl::StrJoin(r.reference_ranks, ", "),
      r.reference_steps, FormatMs(r.stage_suspect_ns), FormatMs(r.stage_reference_ns),
      (r.stage_suspect_ns - r.stage_reference_ns) / 1e6);
  for (const OperatorFinding& f : r.findings) {
    absl::StrAppendFormat(&out, "  %-10s %+8.2f ms/step  z %5.1f  %s", OperatorRoleName(f.role),
                          f.excess_ns / 1e6, f.z, f.path);
    if (f.role == OperatorRole::kDependency || f.own_time) {
      absl::StrAppendFormat(&out, "  (the next operator starts %s late)",
                            FormatMs(f.start_delay_ns));
    } else {
      absl::StrAppendFormat(&out, "  (%s against %s)", FormatMs(f.suspect_ns),
                            FormatMs(f.reference_ns));
    }
    if (f.late_followers > 0) {
      absl::StrAppend(&out, "; ", f.late_followers, " operator", f.late_followers == 1 ? "" : "s",
                      " after it started late because of it");
    }
    out += "\n";
  }
  if (!r.findings.empty()) {
    absl::StrAppendFormat(&out, "the findings explain %s of the stage's %s per step",
                          FormatMs(r.explained_ns),
                          FormatMs(r.stage_suspect_ns - r.stage_reference_ns));
    if (r.nested_findings > 0) {
      absl::StrAppend(&out, " (", r.nested_findings,
                      r.nested_findings == 1 ? " finding lies" : " findings lie",
                      " within another finding's call path: counted once)");
    }
    out += "\n";
  }
  for (const std::string& n : r.notes) absl::StrAppend(&out, "note: ", n, "\n");
  return out;
}

nlohmann::ordered_json OperatorReportJson(const OperatorReport& r) {
  nlohmann::ordered_json j;
  j["stage"] = r.stage;
  j["suspect_rank"] = r.suspect_rank;
  j["reference_ranks"] = r.reference_ranks;
  j["suspect_steps"] = r.suspect_steps;
  j["reference_steps"] = r.reference_steps;
  j["stage_suspect_ns"] = r.stage_suspect_ns;
  j["stage_reference_ns"] = r.stage_reference_ns;
  j["explained_ns"] = r.explained_ns;
  nlohmann::ordered_json findings = nlohmann::ordered_json::array();
  for (const OperatorFinding& f : r.findings) {
    nlohmann::ordered_json o;
    o["path"] = f.path;
    o["role"] = OperatorRoleName(f.role);
    o["excess_ns"] = f.excess_ns;
    o["z"] = f.z;
    o["suspect_ns"] = f.suspect_ns;
    o["reference_ns"] = f.reference_ns;
    o["start_delay_ns"] = f.start_delay_ns;
    o["late_followers"] = f.late_followers;
    o["own_time"] = f.own_time;
    findings.push_back(std::move(o));
  }
  j["findings"] = std::move(findings);
  j["notes"] = r.notes;
  return j;
}

}  // namespace stagefrontier
