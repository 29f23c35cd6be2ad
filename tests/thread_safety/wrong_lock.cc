// Reads a field guarded by a mutex without holding it: tests/thread_safety/check.sh builds this
// under clang's -Wthread-safety and expects the build to fail, so that a check that silently
// stopped checking (a lost flag, a compiler that ignores the attributes, a Mutex that lost its
// capability attribute) fails CI instead.
#include "absl/base/thread_annotations.h"
#include "base/mutex.h"

namespace stagefrontier {

class Counter {
 public:
  int Read() const { return value_; }  // wrong: no lock

 private:
  mutable Mutex mu_;
  int value_ ABSL_GUARDED_BY(mu_) = 0;
};

int ReadCounter(const Counter& c) { return c.Read(); }

}  // namespace stagefrontier
