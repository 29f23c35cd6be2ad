// Conversions between the engine's structs and the wire contract (proto/stagefrontier/v1).
//
//   v1::Verdict out; VerdictToProto(schema, verdict, &out);
//   absl::StatusOr<StageSchema> s = SchemaFromProto(declaration.stages());
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_PROTO_CONVERT_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_PROTO_CONVERT_H_

#include "absl/status/statusor.h"
#include "daemon/accounting/engine.h"
#include "daemon/coordinator/job_layout.h"
#include "shm/stage_schema.h"
#include "stagefrontier/v1/ingest.pb.h"
#include "stagefrontier/v1/query.pb.h"

namespace stagefrontier {

// Builds a schema from declared stages; InvalidArgument as StageSchema::Create, or for an
// unknown kind.
[[nodiscard]] absl::StatusOr<StageSchema> SchemaFromProto(
    const google::protobuf::RepeatedPtrField<v1::Stage>& stages);
void SchemaToProto(const StageSchema& schema, google::protobuf::RepeatedPtrField<v1::Stage>* out);

// A rank's declared layout (RankOwned.layout, RankDeclaration.layout); pipeline_stages 0: none.
DeclaredLayout LayoutFromProto(const v1::RankLayout& l);

// A collective interval as the engine's probe span (stage left 0: the caller places it).
// InvalidArgument, saying why, for an unknown operation or times out of order or beyond a
// day after the step start.
[[nodiscard]] absl::StatusOr<ProbeSpan> SpanFromProto(const v1::CollectiveInterval& c);

// `waiting_ranks`: the ranks that wait for a suspect (a job's world size - 1; 0 unknown).
void VerdictToProto(const StageSchema& schema, const Verdict& v, int32_t waiting_ranks,
                    v1::Verdict* out);
void ReportToProto(const StageSchema& schema, const GroupReport& r, int32_t waiting_ranks,
                   v1::SuspectsReply* out);
void StepToProto(const StageSchema& schema, const StepAccounting& acc, v1::StepSummary* out);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_PROTO_CONVERT_H_
