#include "daemon/captures/capture_analysis.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/captures/capture_file_name.h"
#include "daemon/captures/chrome_trace.h"
#include "daemon/captures/operator_profile.h"

namespace stagefrontier {
namespace {

// N from "rank<N>" in the file's base name (trace_rank3.json, as the capture and
// ddp_example's profiler name them); -1 without one.
int32_t RankFromFileName(const std::string& path) {
  const std::string base = std::filesystem::path(path).filename().string();
  const size_t at = base.rfind("rank");
  if (at == std::string::npos) return -1;
  size_t end = at + 4;
  while (end < base.size() && absl::ascii_isdigit(static_cast<unsigned char>(base[end]))) ++end;
  int32_t rank = -1;
  if (end == at + 4 || !absl::SimpleAtoi(base.substr(at + 4, end - at - 4), &rank)) return -1;
  return rank;
}

absl::StatusOr<OperatorProfile> ProfileFile(const std::string& path, const StageSchema& schema,
                                            const std::string& stage,
                                            std::vector<std::string>* notes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream buf;
  buf << in.rdbuf();
  absl::StatusOr<ChromeTrace> trace = ParseChromeTrace(buf.str(), path);
  if (!trace.ok()) return trace.status();
  if (trace->rank < 0) {
    trace->rank = RankFromFileName(path);
    // The base name only: a report is read far from the machine whose folders hold the file.
    const std::string base = std::filesystem::path(path).filename().string();
    // A capture's own name (trace_rank<R>_step<F>.json) says its rank by design: no note.
    if (!ParseCaptureFileName(base)) {
      notes->push_back(trace->rank < 0
                           ? absl::StrCat(base,
                                          " has no distributedInfo.rank and no rank<N> in its "
                                          "name: rank -1")
                           : absl::StrCat(base, " has no distributedInfo.rank: rank ", trace->rank,
                                          " from its name"));
    }
  }
  return ProfileOperators(*trace, schema, stage, path);
}

}  // namespace

absl::StatusOr<OperatorReport> AnalyzeCaptureFiles(const std::string& suspect_path,
                                                   const std::vector<std::string>& reference_paths,
                                                   const StageSchema& schema,
                                                   const std::string& stage,
                                                   const CompareOptions& options) {
  std::vector<std::string> notes;
  absl::StatusOr<OperatorProfile> suspect = ProfileFile(suspect_path, schema, stage, &notes);
  if (!suspect.ok()) return suspect.status();
  std::vector<OperatorProfile> references;
  for (const std::string& path : reference_paths) {
    absl::StatusOr<OperatorProfile> p = ProfileFile(path, schema, stage, &notes);
    if (!p.ok()) return p.status();
    references.push_back(std::move(*p));
  }
  absl::StatusOr<OperatorReport> report = CompareOperators(*suspect, references, options);
  if (!report.ok()) return report.status();
  report->notes.insert(report->notes.begin(), notes.begin(), notes.end());
  return report;
}

}  // namespace stagefrontier
