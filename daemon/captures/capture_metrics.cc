#include "daemon/captures/capture_metrics.h"

namespace stagefrontier {

using prometheus::BuildCounter;

CaptureMetrics::CaptureMetrics(prometheus::Registry& r) {
  auto one = [&r](const char* name, const char* help) {
    return &BuildCounter().Name(name).Help(help).Register(r).Add({});
  };
  asked_.counter = one("stagefrontier_captures_asked_total",
                       "Captures asked (automatic after verdicts, and by hand)");
  skipped_.counter = one("stagefrontier_capture_windows_skipped_total",
                         "Closed windows after which the policy asked no capture");
  unreached_.counter = one("stagefrontier_capture_requests_unreached_total",
                           "Per-rank capture requests no sidecar took (the rank's node gone)");
  files_.counter =
      one("stagefrontier_capture_files_stored_total", "Capture files the sidecars delivered whole");
  bytes_.counter = one("stagefrontier_capture_bytes_stored_total", "Their bytes (uncompressed)");
  refused_.counter = one("stagefrontier_capture_chunks_refused_total",
                         "Capture chunks refused (malformed, too large, disk refused)");
  evicted_.counter =
      one("stagefrontier_capture_files_evicted_total", "Stored capture files dropped by retention");
  abandoned_.counter = one("stagefrontier_capture_uploads_abandoned_total",
                           "Unfinished uploads dropped after an hour without a chunk");
  auto& refusals = BuildCounter()
                       .Name("stagefrontier_capture_chunks_refused_by_reason_total")
                       .Help(
                           "Capture chunks refused because no capture asked for the file, or "
                           "because the store, the job or the node was at a bound")
                       .Register(r);
  refused_not_asked_.counter = &refusals.Add({{"reason", "not_asked"}});
  refused_busy_.counter = &refusals.Add({{"reason", "busy"}});
  partial_bytes_ = &prometheus::BuildGauge()
                        .Name("stagefrontier_capture_partial_bytes")
                        .Help(
                            "Bytes of capture uploads in flight (.part files), counted "
                            "against --capture-keep-mb")
                        .Register(r)
                        .Add({});
  partial_uploads_ = &prometheus::BuildGauge()
                          .Name("stagefrontier_capture_partial_uploads")
                          .Help("Capture uploads in flight")
                          .Register(r)
                          .Add({});
  auto& reports = BuildCounter()
                      .Name("stagefrontier_capture_reports_total")
                      .Help("Capture reports written, by result")
                      .Register(r);
  analysed_.counter = &reports.Add({{"result", "analysed"}});
  failed_.counter = &reports.Add({{"result", "failed"}});
  auto& answers = BuildCounter()
                      .Name("stagefrontier_capture_rank_answers_total")
                      .Help("Ranks' final answers to capture requests (their trainer's profiler)")
                      .Register(r);
  rank_done_.counter = &answers.Add({{"state", "done"}});
  rank_failed_.counter = &answers.Add({{"state", "failed"}});
}

void CaptureMetrics::Update(const CaptureTrigger::Counters& t, const CaptureStore::Counters& s,
                            const CaptureReports::Counters& r) {
  asked_.To(t.asked);
  skipped_.To(t.skipped);
  unreached_.To(t.unreached);
  files_.To(s.files);
  bytes_.To(s.bytes);
  refused_.To(s.refused);
  evicted_.To(s.evicted);
  abandoned_.To(s.abandoned);
  refused_not_asked_.To(s.refused_not_asked);
  refused_busy_.To(s.refused_busy);
  partial_bytes_->Set(static_cast<double>(s.partial_bytes));
  partial_uploads_->Set(static_cast<double>(s.partial_uploads));
  analysed_.To(r.analysed);
  failed_.To(r.failed);
  rank_done_.To(t.ranks_done);
  rank_failed_.To(t.ranks_failed);
}

}  // namespace stagefrontier
