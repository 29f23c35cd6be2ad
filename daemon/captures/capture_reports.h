// From collected capture files to the report a user reads (`sfctl capture-report`): once every
// rank of a capture has sent its file (capture_store.h), the suspect's trace and the reference
// ranks' are compared in the capture's stage (capture_analysis.h) on a worker thread of its
// own, and the report is written beside the files as <root>/<job>/capture<ID>.report.json, so
// it survives a restart of the coordinator.
//
//   CaptureReports reports(&store, decision_of, schema_of, log);
//   store.SetOnComplete([&](const StoredCapture& f) { reports.OnFileStored(f); });
//   reports.Start();  ...  absl::StatusOr<CaptureReportView> v = reports.Get("job1", 3);
#ifndef STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_REPORTS_H_
#define STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_REPORTS_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/captures/capture_analysis_child.h"
#include "daemon/captures/capture_policy.h"
#include "daemon/captures/capture_store.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

// What a capture's report says now.
struct CaptureReportView {
  enum class State { kWaiting, kAnalysed, kFailed, kNotAnalysed };
  State state = State::kWaiting;
  std::string detail;                // waiting for which ranks, why it failed or was not analysed
  std::vector<StoredCapture> files;  // this capture's files held by the coordinator
  std::string text;                  // the report in words (analysed)
  std::string json;                  // the whole report as JSON (analysed or failed)
};

const char* CaptureReportStateName(CaptureReportView::State state);

class CaptureReports {
 public:
  using DecisionsOf = std::function<std::vector<CaptureDecision>(const std::string& job)>;
  using SchemaOf = std::function<std::optional<StageSchema>(const std::string& job)>;
  using Log = std::function<void(const std::string&)>;
  // The ranks' answers to capture `d` (CaptureTrigger::Answers).
  using AnswersOf =
      std::function<std::vector<RankCaptureAnswer>(const std::string&, const CaptureDecision&)>;

  struct Counters {
    uint64_t analysed = 0;
    uint64_t failed = 0;
  };

  CaptureReports(CaptureStore* store, DecisionsOf decisions_of, SchemaOf schema_of,
                 Log log = nullptr);
  ~CaptureReports();

  // Starts the worker; stack captures a previous run left without a report are looked at
  // again.
  void Start();
  void Stop();

  // With answers, a capture stops waiting for the file of a rank whose profiler failed: it is
  // analysed without that rank if a suspect and a reference remain, else its report says
  // which ranks failed and why. Set before Start.
  void SetAnswersOf(AnswersOf answers_of) { answers_of_ = std::move(answers_of); }
  // How a capture's traces are compared; in process by default. The coordinator runs it in a
  // child process (capture_analysis_child.h): a trace that breaks the analysis fails its
  // capture's report and nothing else. Set before Start.
  void SetAnalyser(CaptureAnalyser analyser) { analyser_ = std::move(analyser); }

  // Keeps capture `d` of `job` on disk (<root>/<job>/capture<ID>.decision.json), so that a
  // restarted coordinator, or one whose policy has since forgotten it, still analyses it when
  // its files arrive and still answers for it. A write that fails is logged: the capture is
  // then analysed only while the policy holds it.
  void Remember(const std::string& job, const CaptureDecision& d);
  // Whether a capture asked of `job` (held by the policy or remembered) asked for the file
  // `name`: a trace of name.rank from name.first_step, or the stacks (or flight recorder dump)
  // of name.rank for capture name.capture_id. The capture store takes only such files
  // (CaptureStore::SetExpected).
  bool Expects(const std::string& job, const CaptureFileName& name) const;
  // The captures of `job` kept by Remember, by id.
  std::vector<CaptureDecision> Remembered(const std::string& job) const;
  // The highest capture id with a decision or a report under `root`, 0 when none: a restarted
  // coordinator's ids go on after it (CaptureTrigger::SeedNextId).
  static uint64_t HighestIdIn(const std::string& root);

  // A file arrived: the captures of its job are looked at again on the worker thread.
  void OnFileStored(const StoredCapture& file) { Poke(file.job); }
  // Something changed for `job` (a file, a rank's answer): looked at again on the worker.
  void Poke(const std::string& job);

  // Looks at the job's captures now, on the caller's thread (tests; the worker calls it).
  // Returns how many reports were written.
  int AnalyseJob(const std::string& job);

  // Capture `id` of `job`: its report if written, else where it stands. NotFound for a capture
  // neither the policy nor the store knows.
  [[nodiscard]] absl::StatusOr<CaptureReportView> Get(const std::string& job, uint64_t id) const;

  Counters counters() const;

 private:
  std::string ReportPath(const std::string& job, uint64_t id) const;
  std::string DecisionPath(const std::string& job, uint64_t id) const;
  // The policy's captures of `job`, then the remembered ones it no longer holds.
  std::vector<CaptureDecision> KnownDecisions(const std::string& job) const;
  // The capture's files among `all` (the store's files of its job), and the ranks still
  // missing.
  static std::vector<StoredCapture> FilesOf(const CaptureDecision& d,
                                            const std::vector<StoredCapture>& all,
                                            std::vector<int32_t>* missing);
  void Run();
  // Writes the report of stack capture `d` once every rank's stacks came, every missing rank
  // was refused by its sidecar, or kStacksWaitNs passed; false while it waits. `all`: the
  // store's files of `job`.
  bool ReportStacks(const std::string& job, const CaptureDecision& d,
                    const std::vector<StoredCapture>& all);

  // The missing ranks that answered failed, as "rank R: its profiler failed (why)"; empty
  // unless every missing rank did.
  std::vector<std::string> GivenUp(const std::string& job, const CaptureDecision& d,
                                   const std::vector<int32_t>& missing) const;

  CaptureStore* store_;
  AnswersOf answers_of_;
  CaptureAnalyser analyser_ = AnalyseCaptureInProcess;
  DecisionsOf decisions_of_;
  SchemaOf schema_of_;
  Log log_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> pending_jobs_;
  std::set<std::string> stack_jobs_;  // jobs with stack captures waiting for their files
  std::set<std::string> unwritable_;  // reports that could not be written (logged once)
  bool stop_ = false;
  Counters counters_;
  std::thread worker_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_REPORTS_H_
