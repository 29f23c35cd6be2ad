// The names capture files have from the trainer to the coordinator's store (capture.py and the
// stub write them under the capture directory, in a folder named after the job):
//   trace_rank<R>_step<F>.json        rank R's profiler trace of the steps from F;
//   stacks_rank<R>_capture<ID>.txt    rank R's thread stacks for capture ID (a hang: the stub's
//                                     hang dump, client/hang_dump.h);
//   flightrec_rank<R>_capture<ID>.json  rank R's NCCL Flight Recorder dump for capture ID
//                                     (stagefrontier.torch, beside the stacks, GPU jobs only).
//
//   std::optional<CaptureFileName> n = ParseCaptureFileName("trace_rank3_step120.json");
//   // n->kind == CaptureFileKind::kTrace, n->rank == 3, n->first_step == 120
#ifndef STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_FILE_NAME_H_
#define STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_FILE_NAME_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace stagefrontier {

enum class CaptureFileKind { kTrace, kStacks, kFlightRecorder };

struct CaptureFileName {
  CaptureFileKind kind = CaptureFileKind::kTrace;
  int32_t rank = -1;
  int64_t first_step = -1;  // traces
  uint64_t capture_id = 0;  // stacks and flight recorder dumps
};

// The kind, rank and first step or capture id of a finished capture file's name; nullopt for
// anything else (a temporary ".part" file, a marker, a path with a directory, numbers out of
// range).
std::optional<CaptureFileName> ParseCaptureFileName(std::string_view name);

// True for a trainer's temporary file of a capture being written: <name>.<pid>.part, where
// <name> parses (the trainer writes it, then renames it).
bool IsCapturePartFileName(std::string_view name);

// trace_rank<rank>_step<first_step>.json
std::string CaptureFileNameFor(int32_t rank, int64_t first_step);
// stacks_rank<rank>_capture<id>.txt
std::string StacksFileNameFor(int32_t rank, uint64_t capture_id);
// flightrec_rank<rank>_capture<id>.json
std::string FlightRecorderFileNameFor(int32_t rank, uint64_t capture_id);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_FILE_NAME_H_
