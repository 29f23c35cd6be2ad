// sfctl selftest: runs self-tests on a live job and waits for what the verdicts found. One
// probe (a rank, a stage, a delay) or a sweep over stages and ranks, which prints the
// detection rate and the false alarms (rank-targeted verdicts in windows without a delay): a
// precision/recall for this job on this cluster. The trainer must allow self-tests
// (STAGEFRONTIER_ALLOW_SELFTEST=1). docs/cli.md.
//
//   SelfTestOptions o; o.job = "run42"; o.rank = 3; o.stage = "data"; o.delay_ms = 50;
//   int rc = RunSelfTest(*stub, token, o, std::cout);  // 0 found, 4 missed, 1 not run, 3 down
#ifndef STAGEFRONTIER_DAEMON_SFCTL_SFCTL_SELFTEST_H_
#define STAGEFRONTIER_DAEMON_SFCTL_SFCTL_SELFTEST_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "daemon/sfctl/sfctl_command.h"
#include "stagefrontier/v1/query.grpc.pb.h"

namespace stagefrontier {

struct SelfTestOptions {
  std::string job;
  int32_t rank = -1;
  std::string stage;
  uint32_t delay_ms = 50;
  uint32_t steps = 20;
  uint32_t lead_steps = 0;  // 0: the coordinator picks (a few seconds ahead)
  int wait_s = 600;         // give up waiting for one probe's result after this long
  bool json = false;
  // Sweep: every stage in `stages` (empty: every non-sync stage) on every rank in `ranks`
  // (empty: the first, middle and last rank), one after another, with a delay-free window
  // between probes.
  bool sweep = false;
  std::vector<std::string> stages;
  std::vector<int32_t> ranks;
  int call_timeout_s = 10;  // per gRPC call
  uint64_t cancel_id = 0;   // not 0: cancel that self-test of the job instead
  bool list = false;        // list the job's self-tests instead
};

// Runs one probe (or the sweep) and prints the outcome. A probe still running when sfctl is
// interrupted (SIGINT, SIGTERM) or gives up waiting is cancelled first; a killed sfctl's probe
// is cancelled by the coordinator when nobody asks for its result (30 s). Returns the exit status:
// 0 found (every probe found and no false alarm for a sweep), 4 missed (or a false alarm), 1 a
// probe could not run (refused by the stub or the coordinator, unanswered, timed out), 3 the
// coordinator is unreachable.
int RunSelfTest(v1::Query::Stub& stub, const std::string& token, const SelfTestOptions& options,
                std::ostream& out);

// One line per self-test, as sfctl prints them.
std::string RenderSelfTest(const v1::SelfTestReport& t);

// The subcommand, as an entry of SfctlCommands().
SfctlCommand SelfTestCommand();

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SFCTL_SFCTL_SELFTEST_H_
