// Words and JSON for an operator comparison (operator_compare.h): what `stagefrontier
// compare-ops` prints, and what a capture report will carry.
//
//   std::cout << RenderOperatorReportText(report);
//   nlohmann::ordered_json j = OperatorReportJson(report);
#ifndef STAGEFRONTIER_DAEMON_CAPTURES_OPERATOR_REPORT_RENDER_H_
#define STAGEFRONTIER_DAEMON_CAPTURES_OPERATOR_REPORT_RENDER_H_

#include <nlohmann/json.hpp>
#include <string>

#include "daemon/captures/operator_compare.h"

namespace stagefrontier {

// Several lines: the stage on the suspect and the references, one line per finding (role,
// excess per step, z, call path, the two times), what the findings explain, the notes.
std::string RenderOperatorReportText(const OperatorReport& report);

// Every field of the report; times in ns, roles by name.
nlohmann::ordered_json OperatorReportJson(const OperatorReport& report);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_CAPTURES_OPERATOR_REPORT_RENDER_H_
