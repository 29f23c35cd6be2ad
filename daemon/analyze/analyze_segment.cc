// stagefrontier segment SEGMENT [--json] [--drain RUN.jsonl]: inspect / drain a node's
// shared-memory segment.
#include <fstream>
#include <iostream>
#include <memory>

#include "absl/status/statusor.h"
#include "daemon/analyze/analyze_commands.h"
#include "daemon/analyze/segment_inspect.h"

namespace stagefrontier {
namespace {

struct SegmentFlags {
  std::string path;
  std::string drain_path;
  bool as_json = false;
};

int Segment(const SegmentFlags& f) {
  std::ofstream drain;
  if (!f.drain_path.empty()) {
    drain.open(f.drain_path, std::ios::app);
    if (!drain) {
      std::cerr << "stagefrontier segment: cannot write " << f.drain_path << "\n";
      return 2;
    }
  }
  absl::StatusOr<SegmentSummary> s =
      InspectSegment(f.path, f.drain_path.empty() ? nullptr : &drain);
  if (!s.ok()) {
    std::cerr << "stagefrontier segment: " << s.status().message() << "\n";
    return 2;
  }
  std::cout << (f.as_json ? RenderSegmentJson(*s) : RenderSegmentText(*s));
  return 0;
}

}  // namespace

Subcommand AddSegmentCommand(CLI::App& app) {
  auto f = std::make_shared<SegmentFlags>();
  CLI::App* segment = app.add_subcommand(
      "segment", "Show a node's shared-memory segment; --drain copies its rings into a run file");
  segment->add_option("segment", f->path, "Segment file, e.g. /dev/shm/stagefrontier.JOB.seg")
      ->required();
  segment->add_flag("--json", f->as_json, "Print as JSON");
  segment->add_option("--drain", f->drain_path,
                      "Consume every pending record and append it to this run file (refused "
                      "while a sidecar drains the segment)");
  return {segment, [f] { return Segment(*f); }};
}

}  // namespace stagefrontier
