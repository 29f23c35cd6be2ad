// Transport security shared by the coordinator, the sidecar and sfctl: optional TLS (server
// certificate, optional client certificates) and an optional shared token sent as
// `authorization: Bearer <token>` metadata.
//
//   TlsFiles tls{.cert = "server.crt", .key = "server.key"};
//   absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds = ServerCredentials(tls);
//   absl::StatusOr<std::string> token = ReadTokenFile("/etc/stagefrontier/token");
//   if (!TokenMatches(*context, *token)) return grpc::Status(grpc::UNAUTHENTICATED, "...");
#ifndef STAGEFRONTIER_DAEMON_COMMON_GRPC_SECURITY_H_
#define STAGEFRONTIER_DAEMON_COMMON_GRPC_SECURITY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace stagefrontier {

struct TlsFiles {
  std::string cert;  // PEM certificate (server: its own; client: optional, for mTLS)
  std::string key;   // PEM private key matching `cert`
  std::string ca;    // PEM roots: client: to verify the server; server: client certs
  bool Enabled() const { return !cert.empty() || !ca.empty(); }
};

// Plaintext when no file is named; TLS otherwise (server: cert and key required; with `ca`,
// client certificates are required and verified). InvalidArgument / NotFound naming the file.
[[nodiscard]] absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const TlsFiles& tls);
[[nodiscard]] absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const TlsFiles& tls);

// Reads a token file (trailing newline and spaces dropped). NotFound / InvalidArgument
// (empty) naming the file. An empty path returns "" (no token).
[[nodiscard]] absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// True if `token` is empty or the call carries it (constant-time comparison).
bool TokenMatches(const grpc::ServerContextBase& context, const std::string& token);

// Adds the token to an outgoing call (nothing if empty).
void AttachToken(grpc::ClientContext* context, const std::string& token);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COMMON_GRPC_SECURITY_H_
