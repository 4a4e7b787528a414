// Must not compile with clang -Wthread-safety: it reads a GUARDED_BY member without its lock. The
// ctest thread_safety.UnguardedReadFailsToCompile (clang builds) checks that clang refuses it, so
// a build that passes is known to have had the analysis on.
#include "common/mutex.h"

namespace lakecache {

class Counter {
 public:
  int Unlocked() const { return value_; }  // the error the test expects

 private:
  mutable Mutex mu_;
  int value_ GUARDED_BY(mu_) = 0;
};

int Read(const Counter& counter) { return counter.Unlocked(); }

}  // namespace lakecache
