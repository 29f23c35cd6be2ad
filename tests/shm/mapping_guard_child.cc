// A fresh process for the SIGBUS chaining cases of mapping_guard_test, which need a process in
// which nobody installed a SIGBUS handler before the case decides to:
//   mapping_guard_child DIR default   no handler before ours: a fault outside every guarded
//                                     range must still kill the process with SIGBUS
//   mapping_guard_child DIR chain     a handler installed before ours must still get faults
//                                     outside guarded ranges (exit 42 when it did)
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "shm/mapping_guard.h"

namespace {

void OnSigbusBefore(int, siginfo_t*, void*) { _exit(42); }

// A shared mapping of a file that is then truncated to nothing: touching it raises SIGBUS.
char* TruncatedMapping(const std::string& path) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ftruncate(fd, 1 << 16) != 0) std::exit(3);
  void* p = mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED || ftruncate(fd, 0) != 0) std::exit(3);
  close(fd);
  return static_cast<char*>(p);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const std::string dir = argv[1];
  const std::string mode = argv[2];
  if (mode == "chain") {
    struct sigaction sa {};
    sa.sa_sigaction = &OnSigbusBefore;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, nullptr);
  } else if (mode != "default") {
    return 2;
  }
  // Our handler goes in, watching one range that will not fault.
  static char watched[4096];
  stagefrontier::shm::MappingGuard guard = stagefrontier::shm::MappingGuard::Watch(watched, 4096);
  if (!guard.guarded()) return 4;
  volatile char* unguarded = TruncatedMapping(dir + "/child-" + mode);
  unguarded[100] = 1;  // SIGBUS, not in any guarded range
  std::puts("survived a fault outside every guarded range");
  return 0;
}
