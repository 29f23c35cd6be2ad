// The `stagefrontier` subcommands, one file each (analyze_<name>.cc): each registers its
// options on the command line and returns how to run it. stagefrontier_main.cc runs the one
// parsed. Exit codes: 0 done, 1 usage error, 2 bad input (nothing printed to stdout), 3
// internal error.
//
//   CLI::App app{"..."};
//   std::vector<Subcommand> commands = {AddAnalyzeCommand(app), AddSegmentCommand(app)};
//   app.parse(argc, argv);
//   for (const Subcommand& c : commands) if (c.app->parsed()) return c.run();
#ifndef STAGEFRONTIER_DAEMON_ANALYZE_ANALYZE_COMMANDS_H_
#define STAGEFRONTIER_DAEMON_ANALYZE_ANALYZE_COMMANDS_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "daemon/analyze/run_file.h"
#include "nlohmann/json.hpp"
#include "shm/stage_schema.h"

namespace stagefrontier {

// A subcommand's CLI11 app, its options bound to state that `run` owns.
struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// In the order `stagefrontier --help` lists them.
Subcommand AddAnalyzeCommand(CLI::App& app);         // analyze_run.cc
Subcommand AddSegmentCommand(CLI::App& app);         // analyze_segment.cc
Subcommand AddReduceTraceCommand(CLI::App& app);     // analyze_reduce_trace.cc
Subcommand AddCompareOpsCommand(CLI::App& app);      // analyze_compare_ops.cc
Subcommand AddJournalCommand(CLI::App& app);         // analyze_journal.cc
Subcommand AddJournalCompactCommand(CLI::App& app);  // analyze_journal_compact.cc
Subcommand AddNodesCommand(CLI::App& app);           // analyze_nodes.cc

// Stages of torch.profiler traces as stagefrontier.torch declares them without the comm hook.
inline constexpr char kDefaultTraceSchema[] =
    "data:io,forward:compute,backward:mixed,grad_sync:sync,optimizer:compute";

// Shared by analyze, reduce-trace and journal (analyze_run.cc). Accounts `run` with the
// engine and prints the report; `extra_text` is appended (text) or `extra_json` merged into
// the JSON object. `command` and `label` prefix error messages.
int AnalyzeRun(const std::string& command, const std::string& label, const RecordedRun& run,
               bool as_json, int window, const std::string& extra_text = "",
               const nlohmann::json& extra_json = nullptr);

// Writes every record of `run` as a run file (docs/run-format.md); false when it cannot.
bool WriteRun(const std::string& path, const RecordedRun& run, const StageSchema& schema);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ANALYZE_ANALYZE_COMMANDS_H_
