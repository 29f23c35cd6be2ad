// Fuzz target: arbitrary bytes as a coordinator journal (docs/journal-format.md), restored
// the way the coordinator restores one at startup: framing, resynchronization past damage,
// checksums, records, then replay into a job (decoding packed steps, aligning, accounting),
// and the files recovery keeps aside; a restored journal compacted in place (as a running
// coordinator does) must restore the same steps; then the same bytes as the node ledger and the
// fleet baseline. Restore must succeed
// (keeping what it skips) or fail with a clear status, never crash; a file it refuses is left byte
// for byte as it was.
#include <dirent.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "daemon/coordinator/job_state.h"
#include "daemon/journal/journal_reader.h"
#include "daemon/journal/record_log.h"
#include "daemon/nodes/node_ledger.h"
#include "daemon/sweep/fleet_baseline.h"

namespace {

const std::string& WorkDir() {
  static const std::string dir = [] {
    std::string tmpl = "/tmp/sf_journal_fuzz_XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) std::abort();
    return tmpl;
  }();
  return dir;
}

void Clear(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") unlink((dir + "/" + name).c_str());
  }
  closedir(d);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  (void)stagefrontier::ScanJournal(
      bytes, [](const stagefrontier::v1::JournalRecord&) { return absl::OkStatus(); });
  const std::string dir = WorkDir();
  Clear(dir);
  const std::string path = dir + "/fuzz.journal";
  WriteAll(path, bytes);
  stagefrontier::JobOptions o;
  o.data_dir = dir;
  o.fsync = false;
  o.history_steps = 64;
  o.history_rank_steps = 4096;
  stagefrontier::JournalOpenInfo info;
  auto job = stagefrontier::JobState::Restore(path, o, nullptr, &info, 0);
  if (job.ok()) {
    stagefrontier::v1::JobInfo ji;
    (*job)->Info(&ji);
    // What recovery kept aside is exactly what was there.
    if (!info.kept_original.empty() && ReadAll(info.kept_original) != bytes) std::abort();
    // Compacted in place as a running coordinator does, the journal restores the same job.
    stagefrontier::v1::GetStepsReply steps;
    (*job)->Steps(0, INT64_MAX, 1000, &steps);
    auto compacted = (*job)->CompactJournal({.min_plain_bytes = 1, .block_steps = 4});
    if (compacted.ok() && compacted->records > 0) {
      if (!(*job)->Flush().ok()) std::abort();
      job->reset();
      auto again = stagefrontier::JobState::Restore(path, o, nullptr, nullptr, 0);
      if (!again.ok()) std::abort();
      stagefrontier::v1::JobInfo ji2;
      (*again)->Info(&ji2);
      stagefrontier::v1::GetStepsReply steps2;
      (*again)->Steps(0, INT64_MAX, 1000, &steps2);
      if (ji2.steps_accounted() != ji.steps_accounted() ||
          steps2.SerializeAsString() != steps.SerializeAsString()) {
        std::abort();
      }
    }
  } else if (absl::IsFailedPrecondition(job.status()) && ReadAll(path) != bytes) {
    std::abort();  // a refused file must be left untouched
  }
  job = absl::StatusOr<std::unique_ptr<stagefrontier::JobState>>(absl::UnknownError("done"));

  // The same bytes as the node ledger (same framing, NodeWindow records).
  Clear(dir);
  const std::string ledger_path = dir + "/nodes.ledger";
  WriteAll(ledger_path, bytes);
  stagefrontier::NodeLedgerOptions lo;
  lo.path = ledger_path;
  lo.fsync = false;
  lo.max_nodes = 64;
  stagefrontier::JournalOpenInfo linfo;
  auto ledger = stagefrontier::NodeLedger::Open(lo, &linfo);
  if (ledger.ok()) {
    for (const auto& n : (*ledger)->Nodes()) {
      if (!(n.gpu_seconds >= 0) || n.charged_windows > n.windows) std::abort();
    }
  } else if (absl::IsFailedPrecondition(ledger.status()) && ReadAll(ledger_path) != bytes) {
    std::abort();
  }
  ledger = absl::StatusOr<std::unique_ptr<stagefrontier::NodeLedger>>(absl::UnknownError("done"));

  // And as the fleet baseline (SweepRecorded records).
  Clear(dir);
  const std::string fleet_path = dir + "/sweeps.ledger";
  WriteAll(fleet_path, bytes);
  stagefrontier::FleetBaselineOptions fo;
  fo.path = fleet_path;
  fo.fsync = false;
  stagefrontier::JournalOpenInfo finfo;
  auto fleet = stagefrontier::FleetBaseline::Open(fo, &finfo);
  if (!fleet.ok() && absl::IsFailedPrecondition(fleet.status()) && ReadAll(fleet_path) != bytes) {
    std::abort();
  }
  return 0;
}
