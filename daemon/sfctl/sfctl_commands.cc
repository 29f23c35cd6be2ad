#include "daemon/sfctl/sfctl_commands.h"

#include "daemon/sfctl/sfctl_capture.h"
#include "daemon/sfctl/sfctl_captures.h"
#include "daemon/sfctl/sfctl_control.h"
#include "daemon/sfctl/sfctl_export.h"
#include "daemon/sfctl/sfctl_health.h"
#include "daemon/sfctl/sfctl_jobs.h"
#include "daemon/sfctl/sfctl_nodes.h"
#include "daemon/sfctl/sfctl_selftest.h"
#include "daemon/sfctl/sfctl_steps.h"
#include "daemon/sfctl/sfctl_suspects.h"
#include "daemon/sfctl/sfctl_watch.h"

namespace stagefrontier {

std::vector<SfctlCommand> SfctlCommands() {
  return {JobsCommand(),          SuspectsCommand(),     StepsCommand(),   WatchCommand(),
          HealthCommand(),        NodesCommand(),        CaptureCommand(), CapturesCommand(),
          CaptureReportCommand(), CaptureFetchCommand(), ControlCommand(), SelfTestCommand(),
          ExportCommand()};
}

}  // namespace stagefrontier
