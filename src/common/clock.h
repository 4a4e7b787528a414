// SteadyClock: the steady time a class reads, waits on and sleeps on, passed in through its options
// so that a test moves time (tests/support/fake_clock.h) instead of sleeping for it to pass. The
// default everywhere is SteadyClock::Real(), std::chrono::steady_clock; a class keeps a pointer
// to a clock that outlives it. (Not named Clock: lakecache::Clock already names
// std::chrono::steady_clock itself, in ufs/object_store.h.) Implementations are thread-safe.
#pragma once

#include <chrono>

#include "common/mutex.h"

namespace lakecache {

class SteadyClock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  using duration = std::chrono::steady_clock::duration;

  virtual ~SteadyClock() = default;

  virtual time_point Now() const = 0;
  // Waits on `cv` until it is signalled or this clock reaches `deadline`; false once the deadline
  // has passed. Like CondVar::WaitUntil it may return early: the caller checks its condition again.
  virtual bool WaitUntil(CondVar* cv, Mutex* mu, time_point deadline) const REQUIRES(mu) = 0;
  // Sleeps `d` of this clock's time (a retry's backoff: nothing can end it early).
  virtual void SleepFor(duration d) const = 0;

  // std::chrono::steady_clock, for the whole process.
  static const SteadyClock* Real();
};

}  // namespace lakecache
