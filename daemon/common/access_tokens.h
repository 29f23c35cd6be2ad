// Who may do what on the coordinator's Query service (and so sfctl and the web view's API).
// The shared --token-file token may do everything, and it is the only one sidecars and the
// node sweep use. --token-scopes-file adds narrower tokens, one a line:
//
//   # SCOPE  TOKEN
//   read     9f2c...   # every job's verdicts, steps, health, captures, nodes: nothing changes
//   control  77ab...   # the same, and Control (pause, config, self-tests, captures)
//   job:run42 c01d...  # read and control job run42 only; other jobs do not exist for it
//
//   absl::StatusOr<AccessTokens> t = AccessTokens::Load(shared, "/etc/stagefrontier/scopes");
//   grpc::Status s = t->Check(*context, Access::kControl, "run42");  // OK, or why not
#ifndef STAGEFRONTIER_DAEMON_COMMON_ACCESS_TOKENS_H_
#define STAGEFRONTIER_DAEMON_COMMON_ACCESS_TOKENS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace stagefrontier {

enum class Access { kRead, kControl };

class AccessTokens {
 public:
  // Only the shared token (empty: no token asked at all, every call may do everything).
  static AccessTokens SharedOnly(std::string shared);
  // The shared token and the scoped tokens of `scopes_path` (none when empty). InvalidArgument
  // naming the file and line for a malformed line, an unknown scope, a token used twice or a
  // scoped token without a shared one; NotFound for a missing file.
  [[nodiscard]] static absl::StatusOr<AccessTokens> Load(std::string shared,
                                                         const std::string& scopes_path);

  // OK when the call's token may do `need` on `job` (empty: on no one job, e.g. the node
  // ledger: job-scoped tokens may not). UNAUTHENTICATED for a missing or unknown token,
  // PERMISSION_DENIED saying what the token may do otherwise.
  grpc::Status Check(const grpc::ServerContextBase& context, Access need,
                     const std::string& job) const;
  // Whether the call's token may read `job` (ListJobs lists only those).
  bool MaySee(const grpc::ServerContextBase& context, const std::string& job) const;

  size_t scoped() const { return scoped_.size(); }

 private:
  struct Scoped {
    std::string token;
    Access access = Access::kRead;
    std::string job;  // empty: every job
  };
  // The grant of the call's token: nullptr for an unknown one; &shared_grant_ for the shared.
  const Scoped* Find(const grpc::ServerContextBase& context) const;

  std::string shared_;
  Scoped shared_grant_{"", Access::kControl, ""};
  std::vector<Scoped> scoped_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COMMON_ACCESS_TOKENS_H_
