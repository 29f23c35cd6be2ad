#include "daemon/sfctl/sfctl_command.h"

#include <chrono>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "daemon/common/proto_json.h"
#include "daemon/sfctl/sfctl_status.h"

namespace stagefrontier {

void SfctlCall::Prepare(grpc::ClientContext* ctx, bool deadline) const {
  AttachToken(ctx, token);
  if (deadline) {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(globals.timeout_s));
  }
}

void SfctlCall::Print(const google::protobuf::Message& m, const std::string& text) const {
  *out << (globals.json ? ProtoToJson(m) + "\n" : text);
}

int SfctlCall::Report(const grpc::Status& s) const {
  return s.ok() ? 0 : ReportCallError(s, globals.coordinator);
}

int SfctlUsageError(const std::string& what) {
  std::cerr << "sfctl: " << what << "\n";
  return 2;
}

bool ParseRankList(absl::string_view csv, std::vector<int32_t>* ranks, std::string* bad) {
  for (absl::string_view r : absl::StrSplit(csv, ',', absl::SkipEmpty())) {
    int32_t v = 0;
    if (!absl::SimpleAtoi(r, &v)) {
      *bad = std::string(r);
      return false;
    }
    ranks->push_back(v);
  }
  return true;
}

}  // namespace stagefrontier
