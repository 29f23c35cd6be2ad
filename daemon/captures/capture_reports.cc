#include "daemon/captures/capture_reports.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "shm/control_channel.h"
#include "shm/record_limits.h"

namespace stagefrontier {
namespace {

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream s;
  s << in.rdbuf();
  *out = s.str();
  return true;
}

// Written under a temporary name, then renamed: a reader never sees half a report.
bool WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

// capture<ID>.decision.json and capture<ID>.report.json in `dir`: (ID, file name).
std::vector<std::pair<uint64_t, std::string>> IdFiles(const std::string& dir) {
  std::vector<std::pair<uint64_t, std::string>> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (!name.starts_with("capture")) continue;
    std::string_view rest = name.substr(7);
    size_t digits = 0;
    while (digits < rest.size() && digits < 18 && rest[digits] >= '0' && rest[digits] <= '9') {
      ++digits;
    }
    const std::string_view suffix = rest.substr(digits);
    if (digits == 0 || (suffix != ".decision.json" && suffix != ".report.json")) continue;
    uint64_t id = 0;
    std::from_chars(rest.data(), rest.data() + digits, id);
    out.emplace_back(id, std::string(name));
  }
  ::closedir(d);
  return out;
}

std::vector<int32_t> IntList(const nlohmann::json& j, const char* key) {
  std::vector<int32_t> out;
  if (j.contains(key) && j[key].is_array()) {
    for (const auto& r : j[key]) {
      if (r.is_number_integer()) out.push_back(r.get<int32_t>());
    }
  }
  return out;
}

// The fields a decision file and a report share, in the report's order.
void PutDecision(const std::string& job, const CaptureDecision& d, nlohmann::ordered_json* j) {
  (*j)["capture"] = d.id;
  if (d.kind == CaptureKind::kStacks) {
    (*j)["kind"] = "stacks";
    nlohmann::ordered_json notes = nlohmann::ordered_json::object();
    for (const auto& [rank, note] : d.notes) notes[std::to_string(rank)] = note;
    (*j)["notes"] = std::move(notes);
    (*j)["decided_unix_ns"] = d.decided_unix_ns;
  }
  (*j)["job"] = job;
  (*j)["stage"] = d.stage;
  (*j)["why"] = d.reason;
  (*j)["first_step"] = d.first_step;
  (*j)["steps"] = d.steps;
  (*j)["suspects"] = d.suspects;
  (*j)["references"] = d.references;
}

// Capture `id` as a decision file or a report holds it; fields it lacks take their defaults.
CaptureDecision DecisionFromJson(const nlohmann::json& j, uint64_t id) {
  CaptureDecision d;
  d.id = id;
  d.asked = true;
  d.manual = j.value("manual", false);
  d.reason = j.value("why", "");
  d.stage = j.value("stage", "");
  d.first_step = j.value("first_step", int64_t{-1});
  d.steps = j.value("steps", 0);
  d.verdict_last_step = j.value("verdict_last_step", int64_t{-1});
  d.suspects = IntList(j, "suspects");
  d.references = IntList(j, "references");
  if (j.value("kind", "") == "stacks") {
    d.kind = CaptureKind::kStacks;
    d.decided_unix_ns = j.value("decided_unix_ns", int64_t{0});
    if (j.contains("notes") && j["notes"].is_object()) {
      for (const auto& [rank, note] : j["notes"].items()) {
        int32_t r = -1;
        const auto [end, ec] = std::from_chars(rank.data(), rank.data() + rank.size(), r);
        if (ec == std::errc() && end == rank.data() + rank.size() && note.is_string()) {
          d.notes[r] = note.get<std::string>();
        }
      }
    }
  }
  return d;
}

// The first `max_bytes` of the file at `path` as printable text: other bytes become '?', and
// a cut says so. The file is a trainer's: never trusted to be text.
std::string PrintableHead(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  std::string raw(max_bytes + 1, '\0');
  in.read(raw.data(), static_cast<std::streamsize>(raw.size()));
  raw.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
  const bool cut = raw.size() > max_bytes;
  if (cut) raw.resize(max_bytes);
  for (char& c : raw) {
    const auto u = static_cast<unsigned char>(c);
    if (u != '\n' && u != '\t' && (u < 0x20 || u >= 0x7f)) c = '?';
  }
  if (!raw.empty() && raw.back() != '\n') raw += '\n';
  if (cut) absl::StrAppend(&raw, "... (cut at ", max_bytes, " bytes: sfctl capture-fetch)\n");
  return raw;
}

constexpr size_t kStacksShownBytes = 64 << 10;

// The NCCL Flight Recorder dumps of stack capture `id` among `all`.
std::vector<StoredCapture> FlightRecorderDumps(const std::vector<StoredCapture>& all, uint64_t id) {
  std::vector<StoredCapture> out;
  for (const StoredCapture& f : all) {
    if (f.kind == CaptureFileKind::kFlightRecorder && f.capture_id == id) out.push_back(f);
  }
  return out;
}

int64_t NowUnixNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

const char* CaptureReportStateName(CaptureReportView::State state) {
  switch (state) {
    case CaptureReportView::State::kWaiting:
      return "waiting";
    case CaptureReportView::State::kAnalysed:
      return "analysed";
    case CaptureReportView::State::kFailed:
      return "failed";
    case CaptureReportView::State::kNotAnalysed:
      return "not analysed";
  }
  return "?";
}

CaptureReports::CaptureReports(CaptureStore* store, DecisionsOf decisions_of, SchemaOf schema_of,
                               Log log)
    : store_(store),
      decisions_of_(std::move(decisions_of)),
      schema_of_(std::move(schema_of)),
      log_(std::move(log)) {}

CaptureReports::~CaptureReports() { Stop(); }

void CaptureReports::Start() {
  // Stack captures a previous run left without a report: looked at again by the worker (their
  // files may all be here already, or their wait over).
  if (DIR* d = ::opendir(store_->options().root.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      if (!shm::ValidJobId(e->d_name)) continue;
      for (const CaptureDecision& c : Remembered(e->d_name)) {
        struct stat st {};
        if (c.kind == CaptureKind::kStacks &&
            ::stat(ReportPath(e->d_name, c.id).c_str(), &st) != 0) {
          std::lock_guard<std::mutex> lock(mu_);
          stack_jobs_.insert(e->d_name);
        }
      }
    }
    ::closedir(d);
  }
  worker_ = std::thread([this] { Run(); });
}

void CaptureReports::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (worker_.joinable()) worker_.join();
}

void CaptureReports::Poke(const std::string& job) {
  std::lock_guard<std::mutex> lock(mu_);
  if (std::find(pending_jobs_.begin(), pending_jobs_.end(), job) == pending_jobs_.end()) {
    pending_jobs_.push_back(job);
  }
  cv_.notify_all();
}

std::vector<std::string> CaptureReports::GivenUp(const std::string& job, const CaptureDecision& d,
                                                 const std::vector<int32_t>& missing) const {
  std::vector<std::string> out;
  if (!answers_of_ || missing.empty()) return out;
  const std::vector<RankCaptureAnswer> answers = answers_of_(job, d);
  for (int32_t rank : missing) {
    const auto a = std::find_if(answers.begin(), answers.end(),
                                [&](const RankCaptureAnswer& x) { return x.rank == rank; });
    if (a == answers.end() || a->state != shm::v1::kCaptureFailed) return {};
    out.push_back(absl::StrCat("rank ", rank, ": its profiler failed (",
                               shm::CaptureFailureName(a->failure), "), no trace"));
  }
  return out;
}

void CaptureReports::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  auto recheck = std::chrono::steady_clock::now();
  while (true) {
    // Stack captures are reported once their files came or their wait ran out: looked at
    // again every 2 s while any waits, however busy the queue is with other jobs.
    if (std::chrono::steady_clock::now() >= recheck) {
      for (const std::string& job : stack_jobs_) {
        if (std::find(pending_jobs_.begin(), pending_jobs_.end(), job) == pending_jobs_.end()) {
          pending_jobs_.push_back(job);
        }
      }
      stack_jobs_.clear();
      recheck = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    }
    cv_.wait_until(lock, recheck, [this] { return stop_ || !pending_jobs_.empty(); });
    if (stop_) return;
    if (pending_jobs_.empty()) continue;
    const std::string job = pending_jobs_.front();
    pending_jobs_.pop_front();
    lock.unlock();
    AnalyseJob(job);
    lock.lock();
  }
}

std::string CaptureReports::DecisionPath(const std::string& job, uint64_t id) const {
  return absl::StrCat(store_->options().root, "/", job, "/capture", id, ".decision.json");
}

void CaptureReports::Remember(const std::string& job, const CaptureDecision& d) {
  if (!d.asked || !shm::ValidJobId(job)) return;
  if (d.kind == CaptureKind::kStacks) {
    std::lock_guard<std::mutex> lock(mu_);
    stack_jobs_.insert(job);
  }
  nlohmann::ordered_json j;
  PutDecision(job, d, &j);
  j["manual"] = d.manual;
  j["verdict_last_step"] = d.verdict_last_step;
  const std::string dir = absl::StrCat(store_->options().root, "/", job);
  ::mkdir(dir.c_str(), 0750);  // exists already once a file arrived
  if (!WriteFileAtomically(DecisionPath(job, d.id), j.dump(2) + "\n") && log_) {
    log_(absl::StrCat("capture ", d.id, " of job ", job, ": cannot write ", DecisionPath(job, d.id),
                      " (analysed only while this run remembers it)"));
  }
}

std::vector<CaptureDecision> CaptureReports::Remembered(const std::string& job) const {
  std::vector<CaptureDecision> out;
  if (!shm::ValidJobId(job)) return out;
  for (const auto& [id, name] : IdFiles(absl::StrCat(store_->options().root, "/", job))) {
    if (!name.ends_with(".decision.json")) continue;
    std::string body;
    if (!ReadFile(absl::StrCat(store_->options().root, "/", job, "/", name), &body)) continue;
    const nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) continue;  // damaged: that capture is not resumed
    out.push_back(DecisionFromJson(j, id));
  }
  std::sort(out.begin(), out.end(),
            [](const CaptureDecision& a, const CaptureDecision& b) { return a.id < b.id; });
  return out;
}

uint64_t CaptureReports::HighestIdIn(const std::string& root) {
  uint64_t highest = 0;
  if (DIR* d = ::opendir(root.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      if (!shm::ValidJobId(e->d_name)) continue;
      for (const auto& [id, name] : IdFiles(absl::StrCat(root, "/", e->d_name))) {
        highest = std::max(highest, id);
      }
    }
    ::closedir(d);
  }
  return highest;
}

std::vector<CaptureDecision> CaptureReports::KnownDecisions(const std::string& job) const {
  std::vector<CaptureDecision> out = decisions_of_(job);
  for (CaptureDecision& d : Remembered(job)) {
    const bool held = std::any_of(
        out.begin(), out.end(), [&](const CaptureDecision& x) { return x.asked && x.id == d.id; });
    if (!held) out.push_back(std::move(d));
  }
  return out;
}

bool CaptureReports::Expects(const std::string& job, const CaptureFileName& name) const {
  const bool stacks = name.kind != CaptureFileKind::kTrace;
  for (const CaptureDecision& d : KnownDecisions(job)) {
    if (!d.asked || (d.kind == CaptureKind::kStacks) != stacks) continue;
    if (stacks ? d.id != name.capture_id : d.first_step != name.first_step) continue;
    const std::vector<int32_t> ranks = d.ranks();
    if (std::find(ranks.begin(), ranks.end(), name.rank) != ranks.end()) return true;
  }
  return false;
}

std::string CaptureReports::ReportPath(const std::string& job, uint64_t id) const {
  return absl::StrCat(store_->options().root, "/", job, "/capture", id, ".report.json");
}

std::vector<StoredCapture> CaptureReports::FilesOf(const CaptureDecision& d,
                                                   const std::vector<StoredCapture>& all,
                                                   std::vector<int32_t>* missing) {
  std::vector<StoredCapture> out;
  for (int32_t rank : d.ranks()) {
    auto it = std::find_if(all.begin(), all.end(), [&](const StoredCapture& f) {
      if (f.rank != rank) return false;
      return d.kind == CaptureKind::kStacks
                 ? f.kind == CaptureFileKind::kStacks && f.capture_id == d.id
                 : f.kind == CaptureFileKind::kTrace && f.first_step == d.first_step;
    });
    if (it != all.end()) {
      out.push_back(*it);
    } else if (missing != nullptr) {
      missing->push_back(rank);
    }
  }
  return out;
}

bool CaptureReports::ReportStacks(const std::string& job, const CaptureDecision& d,
                                  const std::vector<StoredCapture>& all) {
  std::vector<int32_t> missing;
  const std::vector<StoredCapture> files = FilesOf(d, all, &missing);
  const std::vector<RankCaptureAnswer> answers =
      answers_of_ ? answers_of_(job, d) : std::vector<RankCaptureAnswer>{};
  auto refusal = [&](int32_t rank) -> std::string {
    for (const RankCaptureAnswer& a : answers) {
      if (a.rank == rank && !a.error.empty()) return a.error;
    }
    return "";
  };
  const bool waited_out = NowUnixNs() - d.decided_unix_ns > kStacksWaitNs;
  const bool all_settled = std::all_of(missing.begin(), missing.end(),
                                       [&](int32_t rank) { return !refusal(rank).empty(); });
  if (!missing.empty() && !all_settled && !waited_out) return false;
  nlohmann::ordered_json j;
  PutDecision(job, d, &j);
  std::string text = absl::StrCat("capture ", d.id, " of job ", job, ": ", d.reason, "\n");
  std::vector<std::string> errors;
  const std::vector<StoredCapture> dumps = FlightRecorderDumps(all, d.id);
  for (int32_t rank : d.ranks()) {
    const auto note = d.notes.find(rank);
    absl::StrAppend(&text, "\n== rank ", rank,
                    note == d.notes.end() ? "" : absl::StrCat(" (", note->second, ")"), " ==\n");
    const auto f = std::find_if(files.begin(), files.end(),
                                [&](const StoredCapture& x) { return x.rank == rank; });
    if (f == files.end()) {
      const std::string why = refusal(rank);
      errors.push_back(absl::StrCat("rank ", rank, ": no stacks: ",
                                    why.empty() ? "no file within 30 s of the request" : why));
      absl::StrAppend(&text, errors.back(), "\n");
      continue;
    }
    absl::StrAppend(&text, PrintableHead(f->path, kStacksShownBytes));
    for (const StoredCapture& fr : dumps) {
      if (fr.rank != rank) continue;
      absl::StrAppend(&text, "NCCL flight recorder dump: ", fr.file_name, " (", fr.bytes,
                      " bytes; sfctl capture-fetch)\n");
    }
  }
  const bool ok = files.size() > 0;
  j["errors"] = errors;
  j["state"] = ok ? "analysed" : "failed";
  j["text"] = text;
  const std::string path = ReportPath(job, d.id);
  if (!WriteFileAtomically(path, j.dump(2) + "\n")) {
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      first = unwritable_.insert(path).second;
    }
    // Tried again every 2 s (a full disk may clear), said once.
    if (log_ && first)
      log_(absl::StrCat("capture ", d.id, " of job ", job, ": cannot write ", path));
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++(ok ? counters_.analysed : counters_.failed);
  }
  if (log_) {
    log_(absl::StrCat("capture ", d.id, " of job ", job, ": stacks of ", files.size(), " of ",
                      d.ranks().size(), " ranks: sfctl capture-report --job ", job, " --capture ",
                      d.id));
  }
  return true;
}

int CaptureReports::AnalyseJob(const std::string& job) {
  int written = 0;
  const std::vector<StoredCapture> all = store_->Files(job);  // one listing for every capture
  for (const CaptureDecision& d : KnownDecisions(job)) {
    if (d.asked && d.kind == CaptureKind::kStacks) {
      struct stat st {};
      if (::stat(ReportPath(job, d.id).c_str(), &st) == 0) continue;  // written already
      if (ReportStacks(job, d, all)) {
        ++written;
      } else {
        std::lock_guard<std::mutex> lock(mu_);
        stack_jobs_.insert(job);  // looked at again by the worker
      }
      continue;
    }
    if (!d.asked || d.stage.empty() || d.references.empty()) continue;
    const std::string path = ReportPath(job, d.id);
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) continue;  // written already
    std::vector<int32_t> missing;
    const std::vector<StoredCapture> files = FilesOf(d, all, &missing);
    // A missing file is waited for, unless its rank's profiler answered failed.
    const std::vector<std::string> given_up = GivenUp(job, d, missing);
    if (!missing.empty() && given_up.empty()) continue;
    auto present = [&](int32_t rank) {
      return std::find(missing.begin(), missing.end(), rank) == missing.end();
    };
    nlohmann::ordered_json j;
    PutDecision(job, d, &j);
    j["left_out"] = given_up;
    std::vector<std::string> reference_paths;
    for (const StoredCapture& f : files) {
      if (std::find(d.references.begin(), d.references.end(), f.rank) != d.references.end()) {
        reference_paths.push_back(f.path);
      }
    }
    const std::optional<StageSchema> schema = schema_of_(job);
    std::string text;
    std::vector<std::string> errors;
    j["reports"] = nlohmann::ordered_json::array();
    if (reference_paths.empty() || std::none_of(d.suspects.begin(), d.suspects.end(), present)) {
      errors = given_up;
      errors.push_back(reference_paths.empty() ? "no reference rank's trace to compare with"
                                               : "no suspect rank's trace");
    }
    for (int32_t suspect : d.suspects) {
      if (!errors.empty()) break;
      if (!present(suspect)) continue;  // its failure is in left_out
      const auto it = std::find_if(files.begin(), files.end(),
                                   [&](const StoredCapture& f) { return f.rank == suspect; });
      if (!schema) {
        errors.push_back("the job's stages are not known (the job is gone)");
        break;
      }
      absl::StatusOr<CaptureAnalysis> r = analyser_(it->path, reference_paths, *schema, d.stage);
      nlohmann::ordered_json report;
      if (r.ok()) {
        report = nlohmann::ordered_json::parse(r->report_json, nullptr, /*allow_exceptions=*/false);
      }
      if (!r.ok() || report.is_discarded()) {
        errors.push_back(
            absl::StrCat("rank ", suspect, ": ",
                         r.ok() ? "the analysis answered malformed JSON" : r.status().message()));
        continue;
      }
      j["reports"].push_back(std::move(report));
      absl::StrAppend(&text, r->text);
    }
    j["errors"] = errors;
    const bool ok = errors.empty();
    if (ok && !given_up.empty()) {
      absl::StrAppend(&text, "left out: ", absl::StrJoin(given_up, "; "), "\n");
    }
    j["state"] = ok ? "analysed" : "failed";
    j["text"] = text;
    if (!WriteFileAtomically(path, j.dump(2) + "\n")) {
      if (log_) log_(absl::StrCat("capture ", d.id, " of job ", job, ": cannot write ", path));
      continue;
    }
    ++written;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++(ok ? counters_.analysed : counters_.failed);
    }
    if (log_) {
      log_(ok ? absl::StrCat("capture ", d.id, " of job ", job, " analysed (", d.stage,
                             "): sfctl capture-report --job ", job, " --capture ", d.id)
              : absl::StrCat("capture ", d.id, " of job ", job,
                             " not analysed: ", absl::StrJoin(errors, "; ")));
    }
  }
  return written;
}

absl::StatusOr<CaptureReportView> CaptureReports::Get(const std::string& job, uint64_t id) const {
  CaptureReportView v;
  std::string body;
  if (ReadFile(ReportPath(job, id), &body)) {
    const nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      v.state = CaptureReportView::State::kFailed;
      v.detail = "the report file is damaged";
      return v;
    }
    const bool ok = j.value("state", "") == "analysed";
    v.state = ok ? CaptureReportView::State::kAnalysed : CaptureReportView::State::kFailed;
    v.text = j.value("text", "");
    v.json = body;
    if (!ok && j.contains("errors") && j["errors"].is_array()) {
      std::vector<std::string> errors;
      for (const auto& e : j["errors"]) {
        if (e.is_string()) errors.push_back(e.get<std::string>());
      }
      v.detail = absl::StrJoin(errors, "; ");
    }
    const CaptureDecision d = DecisionFromJson(j, id);
    const std::vector<StoredCapture> all = store_->Files(job);
    v.files = FilesOf(d, all, nullptr);
    if (d.kind == CaptureKind::kStacks) {
      // The flight recorder dumps beside the stacks, for sfctl capture-fetch.
      for (const StoredCapture& f : FlightRecorderDumps(all, id)) v.files.push_back(f);
    }
    return v;
  }
  std::optional<CaptureDecision> d;
  for (const CaptureDecision& c : KnownDecisions(job)) {
    if (c.asked && c.id == id) d = c;
  }
  if (!d) {
    return absl::NotFoundError(absl::StrCat("no capture ", id, " of job ", job,
                                            " (sfctl captures --job ", job, " lists them)"));
  }
  std::vector<int32_t> missing;
  v.files = FilesOf(*d, store_->Files(job), &missing);
  if (!d->missed.empty() && v.files.empty()) {
    v.state = CaptureReportView::State::kNotAnalysed;
    v.detail = absl::StrCat("missed: ", d->missed);
    return v;
  }
  if (d->kind == CaptureKind::kStacks) {
    v.state = CaptureReportView::State::kWaiting;
    v.detail =
        NowUnixNs() - d->decided_unix_ns > kStacksWaitNs
            ? "the 30 s wait for the stacks is over: the report is being written"
            : absl::StrCat("waiting for the stacks of rank", missing.size() == 1 ? " " : "s ",
                           absl::StrJoin(missing, ", "), " (at most 30 s after the request)");
    return v;
  }
  if (d->stage.empty() || d->references.empty()) {
    v.state = CaptureReportView::State::kNotAnalysed;
    v.detail = d->stage.empty()
                   ? "no stage to compare: asked by hand with no verdict naming one of its ranks; "
                     "fetch the files (sfctl capture-fetch) and run stagefrontier compare-ops"
                   : "no reference rank to compare with";
    return v;
  }
  v.state = CaptureReportView::State::kWaiting;
  v.detail = missing.empty()
                 ? "every file is here; the analysis runs"
                 : absl::StrCat("waiting for the files of rank", missing.size() == 1 ? " " : "s ",
                                absl::StrJoin(missing, ", "));
  return v;
}

CaptureReports::Counters CaptureReports::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

}  // namespace stagefrontier
