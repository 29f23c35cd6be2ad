// sfctl export: a job's steps as a trace to open in ui.perfetto.dev (Chrome Trace Event
// Format JSON, perfetto_export.h): the accounting of each step (GetSteps), every rank's
// recorded stage durations (GetRankSteps) and the verdict windows already held
// (WatchVerdicts, held_only), fetched page by page. docs/cli.md.
//
//   ExportOptions o;
//   o.job = "run42"; o.from = 100; o.to = 400; o.format = "perfetto";
//   int rc = RunExport(*stub, token, o, std::cout);  // 0 written, 1, 2 or 3 as below
#ifndef STAGEFRONTIER_DAEMON_SFCTL_SFCTL_EXPORT_H_
#define STAGEFRONTIER_DAEMON_SFCTL_SFCTL_EXPORT_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "daemon/sfctl/sfctl_command.h"
#include "stagefrontier/v1/query.grpc.pb.h"

namespace stagefrontier {

struct ExportOptions {
  std::string job;
  int64_t from = 0;
  int64_t to = INT64_MAX;
  std::string format = "perfetto";  // "perfetto" or "chrome": the same document
  std::string output;               // a file (written whole, then renamed); "" or "-": `out`
  std::vector<int32_t> ranks;       // only these ranks' tracks (empty: every rank)
  int call_timeout_s = 10;          // per call
};

// Whether `format` names a format export writes ("perfetto", "chrome").
bool IsExportFormat(const std::string& format);

// Fetches the steps of [from, to] and writes the trace to options.output or `out`. Returns 0
// when written; 1 when the coordinator refused (unknown job, bad range or rank: its message
// on stderr), held no step of the range (said, with the oldest step it holds), or the file
// could not be written; 2 for an unknown format; 3 when the coordinator is unreachable.
int RunExport(v1::Query::StubInterface& stub, const std::string& token,
              const ExportOptions& options, std::ostream& out);

// The subcommand, as an entry of SfctlCommands().
SfctlCommand ExportCommand();

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SFCTL_SFCTL_EXPORT_H_
