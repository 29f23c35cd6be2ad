#include "daemon/sfctl/sfctl_captures.h"

#include <chrono>
#include <fstream>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "daemon/common/grpc_security.h"
#include "daemon/common/proto_json.h"
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

}  // namespace stagefrontier
