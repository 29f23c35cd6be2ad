// What the fleet's nodes measure in the node sweep, kept by the coordinator: per check, the
// last `samples_kept` figures of sweeps that passed. A new sweep is judged against it check by
// check; a check fails when its figure lies more than max(4 robust SDs, 20%) below the fleet's
// median (every check is a rate: higher is better). While a check has fewer than
// `min_samples` figures the fleet is still bootstrapping: the figure passes as "bootstrap" and
// joins the baseline. Persisted in <data_dir>/sweeps.ledger (journal framing, SweepRecorded
// records), replayed at Open.
//
//   auto fleet = FleetBaseline::Open({.path = dir + "/sweeps.ledger"}, &info);
//   v1::SweepJudgement j = (*fleet)->Judge(report);   // and records it if it passed
//   (*fleet)->Flush();
//
// Thread-safe.
#ifndef STAGEFRONTIER_DAEMON_SWEEP_FLEET_BASELINE_H_
#define STAGEFRONTIER_DAEMON_SWEEP_FLEET_BASELINE_H_

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/journal/record_log.h"
#include "stagefrontier/v1/journal.pb.h"
#include "stagefrontier/v1/query.pb.h"

namespace stagefrontier {

struct FleetBaselineOptions {
  std::string path;  // "<data_dir>/sweeps.ledger"
  bool fsync = true;
  size_t samples_kept = 512;
  size_t min_samples = 5;
  double max_drop = 0.2;    // at least this far below the median fails...
  double robust_sds = 4.0;  // ...and at least this many robust SDs below it
  size_t max_checks = 64;   // distinct check names kept
};

class FleetBaseline {
 public:
  // Opens (creating if absent) and replays the file. Errors as RecordLog::Open and Create.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<FleetBaseline>> Open(
      const FleetBaselineOptions& options, JournalOpenInfo* info);

  // Judges `report`; when it passed, its measured figures join the baseline (durable after
  // Flush). InvalidArgument for an unsafe node name, a bad check name or a value that is not
  // a finite non-negative number (nothing is recorded then).
  [[nodiscard]] absl::StatusOr<v1::SweepJudgement> Judge(const v1::SweepReport& report,
                                                         int64_t wall_time_ns);
  [[nodiscard]] absl::Status Flush();
  // Figures kept for `check` (0 if unknown).
  size_t samples(const std::string& check) const;

 private:
  explicit FleetBaseline(FleetBaselineOptions o) : options_(std::move(o)) {}
  void AddLocked(const v1::SweepCheck& check);

  const FleetBaselineOptions options_;
  mutable std::mutex mu_;
  std::unique_ptr<RecordLog> file_;
  std::map<std::string, std::deque<double>> samples_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SWEEP_FLEET_BASELINE_H_
