// The `stagefrontier` command line.
//   stagefrontier analyze RUN.jsonl [--json] [--window N]   account a recorded run
//   stagefrontier segment SEGMENT [--json] [--drain RUN.jsonl] inspect / drain a node's segment
//   stagefrontier reduce-trace TRACE.json... [--schema S] [--json] [--out RUN.jsonl]
//                                              reduce torch.profiler traces to the same stages
//   stagefrontier compare-ops --stage S --suspect TRACE.json REFERENCE.json... [--json]
//                                              which operator of a stage makes a rank slow
//   stagefrontier journal JOURNAL [--json] [--window N] [--out RUN.jsonl]
//                                              account a coordinator journal offline
//   stagefrontier journal-compact JOURNAL --out NEW.journal [--block-steps N] [--level L]
//                                [--round-us] [--json]
//                                              the same journal in compact record blocks
//   stagefrontier nodes JOURNAL... [--ranks-per-node K] [--ledger FILE] [--json]
//                                              charge jobs to nodes offline (the node ledger)
// Exit codes: 0 done, 1 usage error, 2 bad input (nothing printed to stdout), 3 internal error.
// Each subcommand lives in its own file, analyze_<name>.cc (analyze_commands.h).
#include <CLI/CLI.hpp>
#include <vector>

#include "daemon/analyze/analyze_commands.h"

int main(int argc, char** argv) {
  using stagefrontier::Subcommand;
  CLI::App app{"StageFrontier: which stage on which rank is slowing the group down"};
  app.require_subcommand(1);
  const std::vector<Subcommand> commands = {
      stagefrontier::AddAnalyzeCommand(app),     stagefrontier::AddSegmentCommand(app),
      stagefrontier::AddReduceTraceCommand(app), stagefrontier::AddCompareOpsCommand(app),
      stagefrontier::AddJournalCommand(app),     stagefrontier::AddJournalCompactCommand(app),
      stagefrontier::AddNodesCommand(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }
  for (const Subcommand& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  return 1;  // unreachable: exactly one subcommand is required
}
