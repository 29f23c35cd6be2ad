#include "daemon/sfctl/sfctl_export.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>

#include "absl/status/statusor.h"
#include "daemon/common/grpc_security.h"
#include "daemon/sfctl/perfetto_export.h"
#include "daemon/sfctl/sfctl_status.h"

namespace stagefrontier {
namespace {

constexpr int32_t kStepsPage = 1000;

int Refused(const grpc::Status& s) { return ReportCallError(s); }

std::unique_ptr<grpc::ClientContext> Context(const std::string& token, int timeout_s) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  AttachToken(ctx.get(), token);
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(timeout_s));
  return ctx;
}

// GetSteps over [o.from, o.to], page by page, into *out.
grpc::Status FetchSteps(v1::Query::StubInterface& stub, const std::string& token,
                        const ExportOptions& o, v1::GetStepsReply* out) {
  int64_t from = o.from;
  for (bool first = true;; first = false) {
    v1::GetStepsRequest req;
    req.set_job(o.job);
    req.set_from_step(from);
    req.set_to_step(o.to);
    req.set_limit(kStepsPage);
    v1::GetStepsReply page;
    grpc::Status s = stub.GetSteps(Context(token, o.call_timeout_s).get(), req, &page);
    if (!s.ok()) return s;
    if (first) {
      *out->mutable_stages() = page.stages();
      out->set_oldest_held_step(page.oldest_held_step());
    }
    for (v1::StepSummary& step : *page.mutable_steps()) *out->add_steps() = std::move(step);
    if (page.steps_size() < kStepsPage) return grpc::Status::OK;
    const int64_t last = page.steps(page.steps_size() - 1).step();
    if (last >= o.to) return grpc::Status::OK;
    from = last + 1;
  }
}

// GetRankSteps over [o.from, o.to], following next_step, into *out.
grpc::Status FetchRankSteps(v1::Query::StubInterface& stub, const std::string& token,
                            const ExportOptions& o, v1::GetRankStepsReply* out) {
  int64_t from = o.from;
  for (bool first = true;; first = false) {
    v1::GetRankStepsRequest req;
    req.set_job(o.job);
    req.set_from_step(from);
    req.set_to_step(o.to);
    for (int32_t r : o.ranks) req.add_ranks(r);
    v1::GetRankStepsReply page;
    grpc::Status s = stub.GetRankSteps(Context(token, o.call_timeout_s).get(), req, &page);
    if (!s.ok()) return s;
    if (first) {
      *out->mutable_stages() = page.stages();
      out->set_world_size(page.world_size());
      out->set_oldest_held_step(page.oldest_held_step());
    }
    for (v1::StepRecords& step : *page.mutable_steps()) *out->add_steps() = std::move(step);
    if (page.next_step() < 0) return grpc::Status::OK;
    if (page.next_step() <= from || page.steps().empty()) {
      return grpc::Status(grpc::INTERNAL, "GetRankSteps made no progress (a coordinator bug)");
    }
    from = page.next_step();
  }
}

// The verdicts the coordinator holds (WatchVerdicts with held_only: the stream ends).
grpc::Status FetchVerdicts(v1::Query::StubInterface& stub, const std::string& token,
                           const ExportOptions& o, std::vector<v1::Verdict>* out) {
  auto ctx = Context(token, o.call_timeout_s);
  v1::WatchVerdictsRequest req;
  req.set_job(o.job);
  req.set_held_only(true);
  auto reader = stub.WatchVerdicts(ctx.get(), req);
  v1::VerdictEvent ev;
  while (reader->Read(&ev)) out->push_back(ev.verdict());
  return reader->Finish();
}

}  // namespace

bool IsExportFormat(const std::string& format) {
  return format == "perfetto" || format == "chrome";
}

int RunExport(v1::Query::StubInterface& stub, const std::string& token, const ExportOptions& o,
              std::ostream& out) {
  if (!IsExportFormat(o.format)) {
    std::cerr << "sfctl: unknown export format \"" << o.format
              << "\" (perfetto, or chrome: the same Chrome trace JSON)\n";
    return 2;
  }
  PerfettoExportInput in;
  in.job = o.job;
  in.from_step = o.from;
  if (o.to != INT64_MAX) in.to_step = o.to;  // INT64_MAX: no --to given
  if (grpc::Status s = FetchSteps(stub, token, o, &in.steps); !s.ok()) return Refused(s);
  if (grpc::Status s = FetchRankSteps(stub, token, o, &in.ranks); !s.ok()) {
    if (s.error_code() == grpc::UNIMPLEMENTED) {
      std::cerr << "sfctl: the coordinator predates GetRankSteps: upgrade it to export\n";
      return 1;
    }
    return Refused(s);
  }
  if (in.steps.steps().empty() && in.ranks.steps().empty()) {
    std::cerr << "sfctl: job " << o.job << " holds no step in [" << o.from << ", " << o.to
              << "] (oldest step held: " << in.steps.oldest_held_step() << ")\n";
    return 1;
  }
  const int64_t first_accounted = in.steps.steps().empty() ? -1 : in.steps.steps(0).step();
  const int64_t records_held = in.ranks.oldest_held_step();
  if (first_accounted >= 0 && (records_held < 0 || records_held > first_accounted)) {
    std::cerr << "sfctl: note: the coordinator holds rank records from step " << records_held
              << " only (-1: none); earlier steps have no rank tracks\n";
  }
  if (grpc::Status s = FetchVerdicts(stub, token, o, &in.verdicts); !s.ok()) return Refused(s);
  absl::StatusOr<std::string> trace = BuildPerfettoTrace(in);
  if (!trace.ok()) {
    std::cerr << "sfctl: cannot build the trace: " << trace.status().message() << "\n";
    return 1;
  }
  if (o.output.empty() || o.output == "-") {
    out << *trace << "\n";
    out.flush();
    return out ? 0 : 1;
  }
  const std::string tmp = o.output + ".part";
  std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
  file << *trace << "\n";
  file.close();
  if (!file || std::rename(tmp.c_str(), o.output.c_str()) != 0) {
    std::cerr << "sfctl: cannot write " << o.output << "\n";
    std::remove(tmp.c_str());
    return 1;
  }
  return 0;
}

namespace {

struct ExportFlags {
  ExportOptions options;
  std::string ranks;
};

}  // namespace

SfctlCommand ExportCommand() {
  return {"export", "a job's steps as a trace for ui.perfetto.dev (Chrome trace JSON)",
          [](CLI::App* sub) -> SfctlRun {
            auto f = std::make_shared<ExportFlags>();
            ExportOptions& ex = f->options;
            sub->add_option("--job", ex.job, "job id")->required();
            sub->add_option("--from", ex.from, "first step");
            sub->add_option("--to", ex.to, "last step");
            sub->add_option("--format", ex.format, "perfetto, or chrome (the same document)")
                ->capture_default_str();
            sub->add_option("--output", ex.output, "write to this file (default: standard output)");
            sub->add_option("--ranks", f->ranks, "only these ranks' tracks, comma-separated");
            return [f](const SfctlCall& call) {
              ExportOptions& o = f->options;
              o.call_timeout_s = call.globals.timeout_s;
              if (std::string bad; !ParseRankList(f->ranks, &o.ranks, &bad)) {
                return SfctlUsageError("--ranks wants numbers, got \"" + bad + "\"");
              }
              return RunExport(*call.stub, call.token, o, *call.out);
            };
          }};
}

}  // namespace stagefrontier
