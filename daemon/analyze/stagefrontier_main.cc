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
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "daemon/accounting/engine.h"
#include "daemon/analyze/journal_export.h"
#include "daemon/analyze/journal_nodes.h"
#include "daemon/analyze/report_render.h"
#include "daemon/analyze/run_file.h"
#include "daemon/analyze/segment_inspect.h"
#include "daemon/analyze/trace_reduce.h"
#include "daemon/archive/journal_compaction.h"
#include "daemon/captures/capture_analysis.h"
#include "daemon/captures/operator_report_render.h"
#include "daemon/common/proto_json.h"
#include "daemon/nodes/nodes_reply.h"
#include "daemon/nodes/nodes_text.h"
#include "nlohmann/json.hpp"

namespace stagefrontier {
namespace {

// Accounts `run` with the engine and prints the report; `extra` is appended (text) or merged
// into the JSON object.
int AnalyzeRun(const std::string& command, const std::string& label, const RecordedRun& run,
               bool as_json, int window, const std::string& extra_text = "",
               const nlohmann::json& extra_json = nullptr) {
  JobConfig job{*run.schema, run.world_size, run.groups, EngineConfig{}, ""};
  job.engine.window_steps = window;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(job);
  if (!engine.ok()) {
    std::cerr << "stagefrontier " << command << ": " << engine.status().message() << "\n";
    return 2;
  }
  std::vector<Verdict> windows;
  for (const auto& [step, input] : run.steps) {
    if (absl::Status s = (*engine)->AddStep(input); !s.ok()) {
      std::cerr << "stagefrontier " << command << ": " << label << ": " << s.message() << "\n";
      return 2;
    }
    for (Verdict& v : (*engine)->TakeClosedVerdicts()) windows.push_back(std::move(v));
  }
  RunInfo info{label, run.job, run.world_size, static_cast<int64_t>(run.steps.size()), run.records};
  const JobReport report = (*engine)->Report();
  if (!as_json) {
    std::cout << RenderReportText(info, *run.schema, report, windows) << extra_text;
    return 0;
  }
  nlohmann::json out = nlohmann::json::parse(RenderReportJson(info, *run.schema, report, windows));
  if (extra_json.is_object()) out.update(extra_json);
  std::cout << out.dump(2) << "\n";
  return 0;
}

int Analyze(const std::string& path, bool as_json, int window) {
  absl::StatusOr<RecordedRun> run = ReadRunFile(path);
  if (!run.ok()) {
    std::cerr << "stagefrontier analyze: " << run.status().message() << "\n";
    return 2;
  }
  return AnalyzeRun("analyze", path, *run, as_json, window);
}

// Writes every record of `run` as a run file (docs/run-format.md); false when it cannot.
bool WriteRun(const std::string& path, const RecordedRun& run, const StageSchema& schema) {
  std::ofstream out(path);
  for (const auto& [step, input] : run.steps) {
    for (const RankStep& rs : input.ranks) {
      out << FormatRunRecord(run.job, run.world_size, schema, step, rs) << "\n";
    }
  }
  return static_cast<bool>(out);
}

int ReduceTrace(const std::vector<std::string>& paths, const std::string& schema_text, bool as_json,
                const std::string& out_path) {
  absl::StatusOr<StageSchema> schema = StageSchema::Parse(schema_text);
  if (!schema.ok()) {
    std::cerr << "stagefrontier reduce-trace: --schema: " << schema.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<TraceReduction> r = ReduceTraceFiles(paths, *schema);
  if (!r.ok()) {
    std::cerr << "stagefrontier reduce-trace: " << r.status().message() << "\n";
    return 2;
  }
  if (!out_path.empty() && !WriteRun(out_path, r->run, *schema)) {
    std::cerr << "stagefrontier reduce-trace: cannot write " << out_path << "\n";
    return 2;
  }
  const double ratio = static_cast<double>(r->trace_bytes) /
                       static_cast<double>(std::max<uint64_t>(1, r->packed_bytes));
  std::ostringstream text;
  text << "\ntraces: " << paths.size() << " files, " << r->trace_bytes << " bytes, "
       << r->trace_events << " events for " << r->rank_steps << " rank-steps ("
       << r->run.steps.size() << " steps)\nStageFrontier's packed step vectors for the same "
       << "rank-steps: " << r->packed_bytes << " bytes (" << std::fixed << std::setprecision(0)
       << ratio << "x smaller)\n";
  for (const std::string& n : r->notes) text << "note: " << n << "\n";
  nlohmann::json extra = {{"trace_files", paths.size()},     {"trace_bytes", r->trace_bytes},
                          {"trace_events", r->trace_events}, {"rank_steps", r->rank_steps},
                          {"packed_bytes", r->packed_bytes}, {"notes", r->notes}};
  return AnalyzeRun("reduce-trace", absl::StrCat(paths.size(), " traces"), r->run, as_json,
                    static_cast<int>(std::max<size_t>(2, r->run.steps.size())), text.str(), extra);
}

int CompareOps(const std::string& suspect, const std::vector<std::string>& references,
               const std::string& schema_text, const std::string& stage, size_t top, bool as_json) {
  absl::StatusOr<StageSchema> schema = StageSchema::Parse(schema_text);
  if (!schema.ok()) {
    std::cerr << "stagefrontier compare-ops: --schema: " << schema.status().message() << "\n";
    return 2;
  }
  CompareOptions options;
  options.top = top;
  absl::StatusOr<OperatorReport> r =
      AnalyzeCaptureFiles(suspect, references, *schema, stage, options);
  if (!r.ok()) {
    std::cerr << "stagefrontier compare-ops: " << r.status().message() << "\n";
    return 2;
  }
  if (as_json) {
    std::cout << OperatorReportJson(*r).dump(2) << "\n";
  } else {
    std::cout << RenderOperatorReportText(*r);
  }
  return 0;
}

int Journal(const std::string& path, bool as_json, int window, const std::string& out_path) {
  absl::StatusOr<JournalRun> r = ReadJournalAsRun(path);
  if (!r.ok()) {
    std::cerr << "stagefrontier journal: " << r.status().message() << "\n";
    return 2;
  }
  if (!out_path.empty() && !WriteRun(out_path, r->run, *r->run.schema)) {
    std::cerr << "stagefrontier journal: cannot write " << out_path << "\n";
    return 2;
  }
  std::ostringstream text;
  text << "\njournal: " << r->journal_records << " records, " << r->run.records << " rank-steps of "
       << r->run.steps.size() << " steps";
  if (r->refused_rank_steps > 0) text << ", " << r->refused_rank_steps << " refused";
  text << "\n";
  for (const std::string& n : r->notes) text << "note: " << n << "\n";
  nlohmann::json extra = {{"journal_records", r->journal_records},
                          {"skipped_bytes", r->skipped_bytes},
                          {"refused_rank_steps", r->refused_rank_steps},
                          {"notes", r->notes}};
  return AnalyzeRun("journal", path, r->run, as_json, window, text.str(), extra);
}

int CompactJournalCommand(const std::string& path, const std::string& out_path,
                          const CompactionOptions& options, bool as_json) {
  absl::StatusOr<CompactionReport> r = CompactJournal(path, out_path, options);
  if (!r.ok()) {
    std::cerr << "stagefrontier journal-compact: " << r.status().message() << "\n";
    return r.status().code() == absl::StatusCode::kInternal ? 3 : 2;
  }
  const RecordBlockStats& t = r->totals;
  // Per rank-stage-step: the whole file (declaration, framing and every other record
  // included), so that the figure is what the disk holds.
  const double cells = static_cast<double>(std::max<uint64_t>(t.rank_stage_steps, 1));
  const double rank_steps = static_cast<double>(std::max<uint64_t>(t.rank_steps, 1));
  if (as_json) {
    nlohmann::json j = {
        {"job", r->job},
        {"stages", r->stages},
        {"duration_unit_ns", options.duration_unit_ns},
        {"input_bytes", r->input_bytes},
        {"output_bytes", r->output_bytes},
        {"blocks", r->blocks},
        {"records", t.records},
        {"record_bytes", t.input_bytes},  // the records serialized, without framing
        {"whole_records", t.whole_records},
        {"rank_steps", t.rank_steps},
        {"rank_stage_steps", t.rank_stage_steps},
        {"input_bytes_per_rank_stage_step", r->input_bytes / cells},
        {"output_bytes_per_rank_stage_step", r->output_bytes / cells},
        {"encode_seconds", r->encode_seconds},
        {"read_back_seconds", r->read_back_seconds},
        {"read_back_rank_steps_per_second", rank_steps / std::max(r->read_back_seconds, 1e-9)}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "job " << r->job << ": " << t.records << " records (" << t.rank_steps
            << " rank-steps x " << r->stages << " stages) in " << r->blocks << " blocks; "
            << t.whole_records << " records kept whole\n"
            << std::fixed << std::setprecision(2) << path << ": " << r->input_bytes << " bytes, "
            << r->input_bytes / cells << " per rank-stage-step\n"
            << out_path << ": " << r->output_bytes << " bytes, " << r->output_bytes / cells
            << " per rank-stage-step (read back and compared: the same records"
            << (options.duration_unit_ns > 1
                    ? absl::StrCat(", durations rounded to ", options.duration_unit_ns, " ns")
                    : std::string())
            << ")\n"
            << std::setprecision(3) << "blocks built in " << r->encode_seconds
            << " s, read back in " << r->read_back_seconds << " s (" << std::setprecision(0)
            << rank_steps / std::max(r->read_back_seconds, 1e-9) << " rank-steps/s)\n";
  return 0;
}

int Nodes(const std::vector<std::string>& paths, const JournalNodesOptions& options,
          std::string ledger_path, bool as_json) {
  std::string temp_dir;
  if (ledger_path.empty()) {
    char dir[] = "/tmp/stagefrontier_nodes_XXXXXX";
    if (mkdtemp(dir) == nullptr) {
      std::cerr << "stagefrontier nodes: cannot create a temporary directory\n";
      return 3;
    }
    temp_dir = dir;
    ledger_path = temp_dir + "/nodes.ledger";
  }
  NodeLedgerOptions lo;
  lo.path = ledger_path;
  lo.fsync = false;
  JournalOpenInfo info;
  absl::StatusOr<std::unique_ptr<NodeLedger>> ledger = NodeLedger::Open(lo, &info);
  int rc = 0;
  std::ostringstream text;
  if (!ledger.ok()) {
    std::cerr << "stagefrontier nodes: " << ledger_path << ": " << ledger.status().message()
              << "\n";
    rc = 2;
  }
  nlohmann::json per_journal = nlohmann::json::array();
  for (size_t i = 0; rc == 0 && i < paths.size(); ++i) {
    // Journals of one job id run again (kept from earlier runs) are distinct jobs here.
    JournalNodesOptions o = options;
    o.job_name = absl::StrCat("journal", i + 1);
    absl::StatusOr<JournalNodesStats> s = ChargeJournal(paths[i], o, ledger->get());
    if (!s.ok()) {
      std::cerr << "stagefrontier nodes: " << paths[i] << ": " << s.status().message() << "\n";
      rc = 2;
      break;
    }
    per_journal.push_back({{"journal", paths[i]},
                           {"windows", s->windows},
                           {"charging_windows", s->charging_windows}});
    text << paths[i] << ": " << s->windows << " windows, " << s->charging_windows
         << " charged a node\n";
  }
  if (rc == 0 && !(*ledger)->Flush().ok()) rc = 2;
  if (rc == 0) {
    v1::ListNodesReply reply;
    (void)FillListNodes(**ledger, v1::ListNodesRequest(), &reply);
    if (as_json) {
      nlohmann::json out = nlohmann::json::parse(ProtoToJson(reply));
      out["journals"] = per_journal;
      std::cout << out.dump(2) << "\n";
    } else {
      std::cout << text.str() << RenderNodesText(reply);
    }
  }
  if (!temp_dir.empty()) {
    unlink(ledger_path.c_str());
    rmdir(temp_dir.c_str());
  }
  return rc;
}

int Segment(const std::string& path, bool as_json, const std::string& drain_path) {
  std::ofstream drain;
  if (!drain_path.empty()) {
    drain.open(drain_path, std::ios::app);
    if (!drain) {
      std::cerr << "stagefrontier segment: cannot write " << drain_path << "\n";
      return 2;
    }
  }
  absl::StatusOr<SegmentSummary> s = InspectSegment(path, drain_path.empty() ? nullptr : &drain);
  if (!s.ok()) {
    std::cerr << "stagefrontier segment: " << s.status().message() << "\n";
    return 2;
  }
  std::cout << (as_json ? RenderSegmentJson(*s) : RenderSegmentText(*s));
  return 0;
}

}  // namespace
}  // namespace stagefrontier

int main(int argc, char** argv) {
  CLI::App app{"StageFrontier: which stage on which rank is slowing the group down"};
  app.require_subcommand(1);
  CLI::App* analyze =
      app.add_subcommand("analyze", "Account a recorded run (JSON Lines) and print the report");
  std::string path;
  bool as_json = false;
  int window = 100;
  analyze
      ->add_option("run", path, "Recorded run, one JSON record per rank-step (docs/run-format.md)")
      ->required();
  analyze->add_flag("--json", as_json, "Print the report as JSON");
  analyze->add_option("--window", window, "Steps per verdict window")->check(CLI::Range(2, 100000));
  CLI::App* segment = app.add_subcommand(
      "segment", "Show a node's shared-memory segment; --drain copies its rings into a run file");
  std::string segment_path;
  std::string drain_path;
  bool segment_json = false;
  segment->add_option("segment", segment_path, "Segment file, e.g. /dev/shm/stagefrontier.JOB.seg")
      ->required();
  segment->add_flag("--json", segment_json, "Print as JSON");
  segment->add_option("--drain", drain_path,
                      "Consume every pending record and append it to this run file (refused "
                      "while a sidecar drains the segment)");
  CLI::App* reduce = app.add_subcommand(
      "reduce-trace",
      "Reduce torch.profiler Chrome traces (one per rank) to the stub's stages and account them "
      "with the same engine; compares their bytes with StageFrontier's");
  std::vector<std::string> trace_paths;
  std::string trace_schema =
      "data:io,forward:compute,backward:mixed,grad_sync:sync,optimizer:compute";
  bool reduce_json = false;
  std::string reduce_out;
  reduce->add_option("traces", trace_paths, "Chrome trace JSON files, one per rank")->required();
  reduce
      ->add_option("--schema", trace_schema,
                   "Stages to reduce to, as the trainer declared them (default: "
                   "stagefrontier.torch's without the comm hook)")
      ->capture_default_str();
  reduce->add_flag("--json", reduce_json, "Print as JSON");
  reduce->add_option("--out", reduce_out, "Also write the reduced steps as a run file");
  CLI::App* compare = app.add_subcommand(
      "compare-ops",
      "Which operator inside a stage makes the suspect rank slow: its profiler trace against "
      "reference ranks' traces of the same steps (culprit, victim, dependency gap)");
  std::string compare_suspect;
  std::vector<std::string> compare_references;
  std::string compare_stage;
  std::string compare_schema = trace_schema;
  size_t compare_top = 5;
  bool compare_json = false;
  compare->add_option("--suspect", compare_suspect, "The suspect rank's Chrome trace")->required();
  compare->add_option("references", compare_references, "Reference ranks' Chrome traces")
      ->required();
  compare->add_option("--stage", compare_stage, "The stage to look inside")->required();
  compare->add_option("--schema", compare_schema, "Stages, as the trainer declared them")
      ->capture_default_str();
  compare->add_option("--top", compare_top, "Findings to print")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  compare->add_flag("--json", compare_json, "Print as JSON");
  CLI::App* journal = app.add_subcommand(
      "journal",
      "Account a coordinator journal offline (a finished job, or a file recovery kept aside); "
      "--out writes its steps as a run file");
  std::string journal_path;
  std::string journal_out;
  journal->add_option("journal", journal_path, "A <job>.journal file (never modified)")->required();
  journal->add_flag("--json", as_json, "Print the report as JSON");
  journal->add_option("--window", window, "Steps per verdict window")->check(CLI::Range(2, 100000));
  journal->add_option("--out", journal_out, "Also write the steps as a run file");
  CLI::App* compact = app.add_subcommand(
      "journal-compact",
      "Write a coordinator journal's records in compact record blocks (docs/journal-format.md): "
      "the same records, read back and compared; the coordinator restores either file");
  std::string compact_in, compact_out;
  stagefrontier::CompactionOptions compact_options;
  bool compact_json = false;
  compact->add_option("journal", compact_in, "A <job>.journal file (never modified)")->required();
  compact->add_option("--out", compact_out, "The new journal (must not exist)")->required();
  compact->add_option("--block-steps", compact_options.block_steps, "Closed steps per block")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  compact->add_option("--level", compact_options.zstd_level, "zstd level")
      ->check(CLI::Range(1, 19))
      ->capture_default_str();
  bool compact_round_us = false;
  compact->add_flag("--round-us", compact_round_us,
                    "Round the step records' durations to the nearest microsecond: a lossy, "
                    "smaller archive (each replayed stage differs by at most 0.5 us)");
  compact->add_flag("--json", compact_json, "Print the figures as JSON");
  CLI::App* nodes = app.add_subcommand(
      "nodes",
      "Charge recorded jobs to nodes offline, as if they ran in this order on the same nodes, and "
      "print the node ledger (classes, wasted GPU-seconds)");
  std::vector<std::string> node_journals;
  stagefrontier::JournalNodesOptions node_options;
  std::string ledger_path;
  nodes->add_option("journals", node_journals, "<job>.journal files, in the order the jobs ran")
      ->required();
  nodes
      ->add_option("--ranks-per-node", node_options.ranks_per_node,
                   "rank r ran on node <prefix><r / K> (journals do not record nodes)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  nodes->add_option("--node-prefix", node_options.node_prefix, "node names' prefix")
      ->capture_default_str();
  nodes->add_option("--window", node_options.window_steps, "Steps per verdict window")
      ->check(CLI::Range(2, 100000))
      ->capture_default_str();
  nodes->add_option("--ledger", ledger_path,
                    "Keep the ledger in this file (appended to if it exists; default: temporary)");
  nodes->add_flag("--json", as_json, "Print as JSON");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }
  if (nodes->parsed()) {
    return stagefrontier::Nodes(node_journals, node_options, ledger_path, as_json);
  }
  if (compact->parsed()) {
    if (compact_round_us) compact_options.duration_unit_ns = 1000;
    return stagefrontier::CompactJournalCommand(compact_in, compact_out, compact_options,
                                                compact_json);
  }
  if (segment->parsed()) return stagefrontier::Segment(segment_path, segment_json, drain_path);
  if (journal->parsed()) {
    return stagefrontier::Journal(journal_path, as_json, window, journal_out);
  }
  if (compare->parsed()) {
    return stagefrontier::CompareOps(compare_suspect, compare_references, compare_schema,
                                     compare_stage, compare_top, compare_json);
  }
  if (reduce->parsed()) {
    return stagefrontier::ReduceTrace(trace_paths, trace_schema, reduce_json, reduce_out);
  }
  return stagefrontier::Analyze(path, as_json, window);
}
