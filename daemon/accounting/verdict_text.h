// Verdict step 7, the renderer: the English explanation and the "what would settle it" hint,
// written from the decided fields only (the Verdict and its VerdictDecision), after every
// decision has been made.
//
//   RenderVerdictText(decision, schema, &verdict);
//   puts(verdict.explanation.c_str());
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_VERDICT_TEXT_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_VERDICT_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "daemon/accounting/verdict.h"
#include "daemon/accounting/verdict_decision.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

// Sets v->explanation and v->settle.
void RenderVerdictText(const VerdictDecision& d, const StageSchema& schema, Verdict* v);

// "1, 2, 3" and, beyond `limit`, " and N more".
std::string FormatRankList(const std::vector<int32_t>& ranks, size_t limit = 12);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_VERDICT_TEXT_H_
