// The name a capture file has from the trainer to the coordinator's store:
// trace_rank<R>_step<F>.json, rank R's trace of the steps from F (capture.py writes it under
// the capture directory, in a folder named after the job).
//
//   std::optional<CaptureFileName> n = ParseCaptureFileName("trace_rank3_step120.json");
//   // n->rank == 3, n->first_step == 120
#ifndef STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_FILE_NAME_H_
#define STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_FILE_NAME_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace stagefrontier {

struct CaptureFileName {
  int32_t rank = -1;
  int64_t first_step = -1;
};

// The rank and first step of a finished capture file's name; nullopt for anything else (a
// temporary ".part" file, a marker, a path with a directory, numbers out of range).
std::optional<CaptureFileName> ParseCaptureFileName(std::string_view name);

// True for a trainer's temporary file of a capture being written:
// trace_rank<R>_step<F>.json.<pid>.part (capture.py writes it, then renames it).
bool IsCapturePartFileName(std::string_view name);

// trace_rank<rank>_step<first_step>.json
std::string CaptureFileNameFor(int32_t rank, int64_t first_step);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_FILE_NAME_H_
