#include "daemon/common/thread_name.h"

#include <pthread.h>

#include "absl/strings/str_cat.h"

namespace stagefrontier {

std::string NameThisThread(absl::string_view name) {
  constexpr size_t kMaxBytes = 15;  // TASK_COMM_LEN less the terminating NUL
  std::string full = absl::StrCat("sf-", name);
  if (full.size() > kMaxBytes) full.resize(kMaxBytes);
  (void)pthread_setname_np(pthread_self(), full.c_str());
  return full;
}

}  // namespace stagefrontier
