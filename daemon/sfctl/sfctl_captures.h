// sfctl capture-report and capture-fetch: what a capture found (the operator report the
// coordinator wrote once every rank's file arrived), and the trace files themselves, to open
// in Perfetto or compare by hand. docs/cli.md.
//
//   CaptureReportOptions o; o.job = "run42"; o.capture = 3; o.wait_s = 120;
//   int rc = RunCaptureReport(*stub, token, o, std::cout);  // 0 analysed, 4 not (yet), 1, 3
#ifndef STAGEFRONTIER_DAEMON_SFCTL_SFCTL_CAPTURES_H_
#define STAGEFRONTIER_DAEMON_SFCTL_SFCTL_CAPTURES_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "daemon/sfctl/sfctl_command.h"
#include "stagefrontier/v1/query.grpc.pb.h"

namespace stagefrontier {

struct CaptureReportOptions {
  std::string job;
  uint64_t capture = 0;
  int wait_s = 0;  // while the capture waits for files, ask again for up to this long
  bool json = false;
  int call_timeout_s = 10;
  std::string out_dir = ".";  // capture-fetch: where the files go
};

// The capture's state, its files and its report. Returns 0 when analysed, 4 when still
// waiting after wait_s, failed or not analysed, 1 when the coordinator refused, 3 when it is
// unreachable.
int RunCaptureReport(v1::Query::StubInterface& stub, const std::string& token,
                     const CaptureReportOptions& options, std::ostream& out);

// Downloads every file of the capture into options.out_dir, one line per file. Returns 0 when
// all arrived whole, 1 on a refusal or a short file (named), 3 when unreachable.
int RunCaptureFetch(v1::Query::StubInterface& stub, const std::string& token,
                    const CaptureReportOptions& options, std::ostream& out);

// The reply in words (capture-report's text output).
std::string RenderCaptureReport(const v1::GetCaptureReportReply& reply);

// The subcommands, as entries of SfctlCommands(): captures (the capture policy's decisions),
// capture-report and capture-fetch.
SfctlCommand CapturesCommand();
SfctlCommand CaptureReportCommand();
SfctlCommand CaptureFetchCommand();

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SFCTL_SFCTL_CAPTURES_H_
