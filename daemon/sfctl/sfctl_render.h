// Text renderings of query replies for sfctl (aligned tables for people); --json output is
// the proto3 JSON mapping of the same replies (daemon/common/proto_json.h, docs/cli.md).
//
//   std::cout << RenderSuspects(reply);
#ifndef STAGEFRONTIER_DAEMON_SFCTL_SFCTL_RENDER_H_
#define STAGEFRONTIER_DAEMON_SFCTL_SFCTL_RENDER_H_

#include <string>

#include "stagefrontier/v1/query.pb.h"

namespace stagefrontier {

std::string RenderJobs(const v1::ListJobsReply& reply);
std::string RenderSuspects(const v1::SuspectsReply& reply);
// A stall (a job that stopped advancing): its reason, limit, and the ranks it names.
std::string RenderStall(const v1::Stall& s);
std::string RenderVerdict(const v1::Verdict& v);
// "window of 100 steps", and "(94..199; 6 profiled steps left out)" when the verdict's span
// holds profiled steps left out of the evidence.
std::string WindowSpan(int32_t steps, const v1::Verdict& v);
std::string RenderSteps(const v1::GetStepsReply& reply);
std::string RenderHealth(const v1::GetHealthReply& reply);
// One line per capture decision: id, by hand or automatic, asked or not, and the reason.
std::string RenderCaptures(const v1::ListCapturesReply& reply);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SFCTL_SFCTL_RENDER_H_
