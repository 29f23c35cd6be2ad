#include "daemon/sfctl/sfctl_captures.h"

#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "daemon/common/grpc_security.h"
#include "daemon/common/proto_json.h"
#include "daemon/sfctl/sfctl_render.h"
#include "daemon/sfctl/sfctl_status.h"

namespace stagefrontier {
namespace {

int Refused(const grpc::Status& s) { return ReportCallError(s); }

grpc::Status Ask(v1::Query::StubInterface& stub, const std::string& token,
                 const CaptureReportOptions& o, v1::GetCaptureReportReply* reply) {
  grpc::ClientContext ctx;
  AttachToken(&ctx, token);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(o.call_timeout_s));
  v1::GetCaptureReportRequest req;
  req.set_job(o.job);
  req.set_capture(o.capture);
  return stub.GetCaptureReport(&ctx, req, reply);
}

}  // namespace

std::string RenderCaptureReport(const v1::GetCaptureReportReply& r) {
  std::string out = absl::StrCat("capture ", r.capture(), " of job ", r.job(), ": ", r.state());
  if (!r.detail().empty()) absl::StrAppend(&out, " (", r.detail(), ")");
  absl::StrAppend(&out, "\n");
  for (const v1::StoredCaptureFile& f : r.files()) {
    absl::StrAppend(&out, "  rank ", f.rank(), ": ", f.file_name(), ", ", f.bytes(), " bytes\n");
  }
  if (!r.text().empty()) absl::StrAppend(&out, "\n", r.text());
  return out;
}

int RunCaptureReport(v1::Query::StubInterface& stub, const std::string& token,
                     const CaptureReportOptions& o, std::ostream& out) {
  v1::GetCaptureReportReply r;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(o.wait_s);
  while (true) {
    r.Clear();
    grpc::Status s = Ask(stub, token, o, &r);
    if (!s.ok()) return Refused(s);
    if (r.state() != "waiting" || std::chrono::steady_clock::now() >= give_up) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  out << (o.json ? ProtoToJson(r) + "\n" : RenderCaptureReport(r));
  return r.state() == "analysed" ? 0 : 4;
}

int RunCaptureFetch(v1::Query::StubInterface& stub, const std::string& token,
                    const CaptureReportOptions& o, std::ostream& out) {
  v1::GetCaptureReportReply r;
  if (grpc::Status s = Ask(stub, token, o, &r); !s.ok()) return Refused(s);
  if (r.files().empty()) {
    std::cerr << "sfctl: capture " << o.capture << " of job " << o.job
              << " has no file at the coordinator yet (" << r.state() << ")\n";
    return 1;
  }
  int rc = 0;
  for (const v1::StoredCaptureFile& f : r.files()) {
    grpc::ClientContext ctx;
    AttachToken(&ctx, token);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(o.call_timeout_s));
    v1::FetchCaptureRequest req;
    req.set_job(o.job);
    req.set_file_name(f.file_name());
    const std::string path = absl::StrCat(o.out_dir, "/", f.file_name());
    const std::string tmp = path + ".part";
    std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
    if (!file) {
      std::cerr << "sfctl: cannot write " << tmp << "\n";
      return 1;
    }
    auto reader = stub.FetchCapture(&ctx, req);
    v1::CaptureFileChunk chunk;
    uint64_t got = 0, size = 0;
    while (reader->Read(&chunk)) {
      size = chunk.file_bytes();
      if (chunk.offset() != got) break;
      file.write(chunk.data().data(), static_cast<std::streamsize>(chunk.data().size()));
      got += chunk.data().size();
    }
    grpc::Status s = reader->Finish();
    file.close();
    if (!s.ok()) {
      std::remove(tmp.c_str());
      return Refused(s);
    }
    if (got != size || !file || std::rename(tmp.c_str(), path.c_str()) != 0) {
      std::cerr << "sfctl: " << f.file_name() << ": " << got << " of " << size
                << " bytes arrived\n";
      std::remove(tmp.c_str());
      rc = 1;
      continue;
    }
    out << "rank " << f.rank() << ": " << path << " (" << got << " bytes)\n";
  }
  return rc;
}

SfctlCommand CapturesCommand() {
  return {"captures", "the capture policy's decisions for a job: asked, and why not",
          [](CLI::App* sub) -> SfctlRun {
            auto job = std::make_shared<std::string>();
            sub->add_option("--job", *job, "job id")->required();
            return [job](const SfctlCall& call) {
              v1::ListCapturesRequest req;
              req.set_job(*job);
              return call.Unary(&v1::Query::Stub::ListCaptures, req, RenderCaptures);
            };
          }};
}

SfctlCommand CaptureReportCommand() {
  return {"capture-report",
          "what a capture found: the operator report, once every rank's file came",
          [](CLI::App* sub) -> SfctlRun {
            auto o = std::make_shared<CaptureReportOptions>();
            sub->add_option("--job", o->job, "job id")->required();
            sub->add_option("--capture", o->capture, "capture id (sfctl captures)")->required();
            sub->add_option("--wait", o->wait_s, "while it waits for files, ask again for S s")
                ->check(CLI::Range(0, 86400));
            return [o](const SfctlCall& call) {
              o->json = call.globals.json;
              o->call_timeout_s = call.globals.timeout_s;
              return RunCaptureReport(*call.stub, call.token, *o, *call.out);
            };
          }};
}

SfctlCommand CaptureFetchCommand() {
  return {"capture-fetch", "download a capture's trace files (open them in ui.perfetto.dev)",
          [](CLI::App* sub) -> SfctlRun {
            auto o = std::make_shared<CaptureReportOptions>();
            sub->add_option("--job", o->job, "job id")->required();
            sub->add_option("--capture", o->capture, "capture id (sfctl captures)")->required();
            sub->add_option("--out", o->out_dir, "directory for the files")->capture_default_str();
            return [o](const SfctlCall& call) {
              o->json = call.globals.json;
              o->call_timeout_s = call.globals.timeout_s;
              return RunCaptureFetch(*call.stub, call.token, *o, *call.out);
            };
          }};
}

}  // namespace stagefrontier
