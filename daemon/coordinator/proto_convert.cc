#include "daemon/coordinator/proto_convert.h"

#include "absl/strings/str_cat.h"
#include "shm/record_limits.h"
#include "shm/segment_layout_v2.h"

namespace stagefrontier {
namespace {

std::string StageName(const StageSchema& schema, int32_t k) {
  return k >= 0 && static_cast<size_t>(k) < schema.size() ? schema.stage(k).name : "";
}

}  // namespace

absl::StatusOr<StageSchema> SchemaFromProto(
    const google::protobuf::RepeatedPtrField<v1::Stage>& stages) {
  std::vector<Stage> out;
  out.reserve(stages.size());
  for (const v1::Stage& s : stages) {
    if (s.kind() < v1::STAGE_KIND_IO || s.kind() > v1::STAGE_KIND_TENSOR) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage \"", s.name(), "\" has unknown kind ", static_cast<int>(s.kind())));
    }
    out.push_back(Stage{s.name(), static_cast<StageKind>(s.kind())});
  }
  return StageSchema::Create(std::move(out));
}

DeclaredLayout LayoutFromProto(const v1::RankLayout& l) {
  return l.pipeline_stages() > 0 ? DeclaredLayout::Of(l.pipeline_stages(), l.pipeline_stage(),
                                                      l.tensor_rank(), l.tensor_size())
                                 : DeclaredLayout::None();
}

absl::StatusOr<ProbeSpan> SpanFromProto(const v1::CollectiveInterval& c) {
  if (c.op() >= shm::v2::kOpCount) {
    return absl::InvalidArgumentError(absl::StrCat("unknown operation ", c.op()));
  }
  if (c.call_offset_ns() < 0 || c.call_offset_ns() > c.start_offset_ns() ||
      c.start_offset_ns() > c.end_offset_ns() || c.end_offset_ns() > shm::kMaxStageNs) {
    return absl::InvalidArgumentError(
        absl::StrCat("times out of order or implausible: call ", c.call_offset_ns(), ", start ",
                     c.start_offset_ns(), ", end ", c.end_offset_ns(), " ns after the step start"));
  }
  ProbeSpan span;
  span.enter_ns = c.start_offset_ns();
  span.exit_ns = c.end_offset_ns();
  span.call_ns = c.call_offset_ns();
  span.op = static_cast<uint16_t>(c.op());
  span.bytes = c.bytes();
  return span;
}

void SchemaToProto(const StageSchema& schema, google::protobuf::RepeatedPtrField<v1::Stage>* out) {
  out->Clear();
  for (const Stage& s : schema.stages()) {
    v1::Stage* p = out->Add();
    p->set_name(s.name);
    p->set_kind(static_cast<v1::StageKind>(s.kind));
  }
}

void VerdictToProto(const StageSchema& schema, const Verdict& v, int32_t waiting_ranks,
                    v1::Verdict* out) {
  out->set_group(v.group);
  out->set_sync_group(v.sync_group);
  out->set_structural(v.structural);
  out->set_node(v.node);
  out->set_first_step(v.first_step);
  out->set_last_step(v.last_step);
  out->set_steps(v.steps);
  out->set_label(VerdictLabelName(v.label));
  out->set_reason(AmbiguityReasonName(v.reason));
  for (const Suspect& s : v.suspects) {
    v1::Suspect* p = out->add_suspects();
    p->set_stage(StageName(schema, s.stage));
    p->set_rank(s.rank);
    p->set_excess_ns(s.excess_ns);
    p->set_share(s.share);
    p->set_wasted_gpu_seconds(WastedGpuSeconds(s.excess_ns, waiting_ranks));
    p->set_flagged_steps(s.flagged_steps);
    p->set_what_if_saving_ns(s.what_if_saving_ns);
  }
  for (int32_t r : v.candidate_ranks) out->add_candidate_ranks(r);
  for (int32_t k : v.candidate_stages) out->add_candidate_stages(StageName(schema, k));
  out->set_exposed_ns(v.exposed_ns);
  out->set_total_excess_ns(v.total_excess_ns);
  out->set_flagged_steps(v.flagged_steps);
  out->set_median_margin_ns(v.median_margin_ns);
  out->set_tie_tolerance_ns(v.tie_tolerance_ns);
  out->set_wait_agreement(v.wait_agreement);
  for (int32_t r : v.concurrent_ranks) out->add_concurrent_ranks(r);
  out->set_group_wide(v.group_wide);
  out->set_rank_shift_ns(v.rank_shift_ns);
  out->set_rank_z(v.rank_z);
  for (const std::string& condition : v.unreliable) out->add_unreliable(condition);
  out->set_partial_steps(v.partial_steps);
  for (int32_t r : v.missing_ranks) out->add_missing_ranks(r);
  out->set_explanation(v.explanation);
  out->set_settle(v.settle);
  for (int64_t s : v.steps_to_profile) out->add_steps_to_profile(s);
}

void ReportToProto(const StageSchema& schema, const GroupReport& r, int32_t waiting_ranks,
                   v1::SuspectsReply* out) {
  VerdictToProto(schema, r.verdict, waiting_ranks, out->mutable_verdict());
  for (size_t k = 0; k < r.stages.size() && k < schema.size(); ++k) {
    const StageSummary& s = r.stages[k];
    v1::StageDashboard* d = out->add_stages();
    d->set_stage(schema.stage(k).name);
    d->set_kind(StageKindName(schema.stage(k).kind));
    d->set_frontier_increment_ns(s.mean_increment_ns);
    d->set_baseline_ns(s.baseline_ns);
    d->set_excess_ns(s.mean_excess_ns);
    d->set_mean_dashboard_ns(s.mean_dashboard_ns);
    d->set_mean_dashboard_baseline_ns(s.mean_dashboard_baseline_ns);
    d->set_max_dashboard_ns(s.max_dashboard_ns);
    d->set_max_dashboard_baseline_ns(s.max_dashboard_baseline_ns);
  }
  out->set_mean_exposed_ns(r.mean_exposed_ns);
  out->set_mean_sum_of_max_ns(r.mean_sum_of_max_ns);
  out->set_frontier_top_stage(StageName(schema, r.frontier_top_stage));
  out->set_mean_top_stage(StageName(schema, r.mean_top_stage));
  out->set_max_top_stage(StageName(schema, r.max_top_stage));
  for (size_t i = 0; i < r.divergence.size() && i < 8; ++i) {
    v1::RankDivergence* d = out->add_divergence();
    d->set_rank(r.divergence[i].rank);
    d->set_stage(StageName(schema, r.divergence[i].stage));
    d->set_ks(r.divergence[i].ks);
  }
  for (const ExcessCell& c : r.verdict.excess_cells) {
    v1::ExcessCell* e = out->add_excess_cells();
    e->set_stage(StageName(schema, c.stage));
    e->set_rank(c.rank);
    e->set_excess_ns(c.excess_ns);
    e->set_flagged_steps(c.flagged_steps);
  }
}

void StepToProto(const StageSchema& schema, const StepAccounting& acc, v1::StepSummary* out) {
  out->set_step(acc.step);
  out->set_exposed_ns(acc.exposed_ns);
  out->set_partial(acc.partial);
  for (int32_t r : acc.missing_ranks) out->add_missing_ranks(r);
  out->set_first_excess_stage(StageName(schema, acc.first_excess_stage));
  for (const StageAccounting& s : acc.stages) {
    v1::StageStep* p = out->add_stages();
    p->set_increment_ns(s.increment_ns);
    p->set_leader(s.leader);
    p->set_margin_ns(s.margin_ns);
    p->set_baseline_ns(s.baseline_ns);
    p->set_excess_ns(s.excess_ns);
    p->set_mean_ns(s.mean_duration_ns);
    p->set_max_ns(s.max_duration_ns);
  }
}

}  // namespace stagefrontier
