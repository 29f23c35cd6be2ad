// Names the calling thread as `top` and `perf` show it, so that a profile or the load harness
// says which duty took the CPU ("sf-acker", "sf-ticker") instead of the binary's name for all.
//
//   std::thread t([] { NameThisThread("journal-compactor"); Run(); });   // "sf-journal-comp"
#ifndef STAGEFRONTIER_DAEMON_COMMON_THREAD_NAME_H_
#define STAGEFRONTIER_DAEMON_COMMON_THREAD_NAME_H_

#include <string>

#include "absl/strings/string_view.h"

namespace stagefrontier {

// "sf-" + `name`, cut to the kernel's 15 bytes. Returns what was set (for tests); a failure
// to set it is ignored (names are for people, nothing depends on them).
std::string NameThisThread(absl::string_view name);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COMMON_THREAD_NAME_H_
