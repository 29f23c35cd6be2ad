#include "daemon/common/access_tokens.h"

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/common/grpc_security.h"

namespace stagefrontier {

AccessTokens AccessTokens::SharedOnly(std::string shared) {
  AccessTokens t;
  t.shared_ = std::move(shared);
  return t;
}

absl::StatusOr<AccessTokens> AccessTokens::Load(std::string shared,
                                                const std::string& scopes_path) {
  AccessTokens t = SharedOnly(std::move(shared));
  if (scopes_path.empty()) return t;
  std::ifstream in(scopes_path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read token scopes ", scopes_path));
  if (t.shared_.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(scopes_path,
                     ": scoped tokens need the shared one (--token-file) too: "
                     "without it every call may do everything"));
  }
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string where = absl::StrCat(scopes_path, ":", n, ": ");
    std::string text(absl::StripAsciiWhitespace(line.substr(0, line.find('#'))));
    if (text.empty()) continue;
    std::vector<std::string> parts =
        absl::StrSplit(text, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (parts.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(where, "want \"SCOPE TOKEN\""));
    }
    Scoped s;
    s.token = parts[1];
    if (parts[0] == "read") {
      s.access = Access::kRead;
    } else if (parts[0] == "control") {
      s.access = Access::kControl;
    } else if (absl::StartsWith(parts[0], "job:") && parts[0].size() > 4) {
      s.access = Access::kControl;
      s.job = parts[0].substr(4);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "unknown scope \"", parts[0], "\" (read, control or job:JOB)"));
    }
    if (s.token.size() < 16) {
      return absl::InvalidArgumentError(absl::StrCat(where, "a token of fewer than 16 characters"));
    }
    bool used = s.token == t.shared_;
    for (const Scoped& o : t.scoped_) used = used || o.token == s.token;
    if (used) return absl::InvalidArgumentError(absl::StrCat(where, "a token used twice"));
    t.scoped_.push_back(std::move(s));
  }
  return t;
}

const AccessTokens::Scoped* AccessTokens::Find(const grpc::ServerContextBase& context) const {
  if (TokenMatches(context, shared_)) return &shared_grant_;  // also: no token asked at all
  for (const Scoped& s : scoped_) {
    if (TokenMatches(context, s.token)) return &s;
  }
  return nullptr;
}

grpc::Status AccessTokens::Check(const grpc::ServerContextBase& context, Access need,
                                 const std::string& job) const {
  const Scoped* s = Find(context);
  if (s == nullptr) {
    return grpc::Status(grpc::UNAUTHENTICATED,
                        "missing or wrong token (authorization: Bearer ...)");
  }
  if (!s->job.empty() && s->job != job) {
    return grpc::Status(grpc::PERMISSION_DENIED,
                        job.empty() ? absl::StrCat("this token is for job ", s->job,
                                                   " only: it may not see other jobs' data")
                                    : absl::StrCat("this token is for job ", s->job, " only"));
  }
  if (need == Access::kControl && s->access != Access::kControl) {
    return grpc::Status(grpc::PERMISSION_DENIED,
                        "this token may read but not control jobs (a read token)");
  }
  return grpc::Status::OK;
}

bool AccessTokens::MaySee(const grpc::ServerContextBase& context, const std::string& job) const {
  const Scoped* s = Find(context);
  return s != nullptr && (s->job.empty() || s->job == job);
}

}  // namespace stagefrontier
