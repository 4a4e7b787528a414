// FakeClock: a SteadyClock that moves only when the test says so (Advance), for code that ages
// things or waits by time. A wait on it returns within a millisecond of real time, as a spurious
// wakeup (its callers loop on their condition), and says whether an Advance reached its deadline;
// a sleep on it moves the clock by the sleep at once, and is recorded (a retry schedule can be
// read back). WaitForWaiters tells a test that the threads it started are idle, waiting for a
// time still to come: each has done all it had to do up to now. Lives here, not in src: nothing
// but tests needs it. Thread-safe.
#pragma once

#include <set>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"

namespace lakecache::testing {

class FakeClock final : public SteadyClock {
 public:
  FakeClock();

  time_point Now() const override EXCLUDES(mu_);
  bool WaitUntil(CondVar* cv, Mutex* mu, time_point deadline) const override REQUIRES(mu)
      EXCLUDES(mu_);
  void SleepFor(duration d) const override EXCLUDES(mu_);

  void Advance(duration d) EXCLUDES(mu_);
  // Waits until at least `n` threads wait on this clock (in WaitUntil) for a deadline still to
  // come; false after 30 s. A waiter whose deadline an Advance passed counts again once it waits
  // anew, having done what became due.
  bool WaitForWaiters(int n) const EXCLUDES(mu_);
  // What SleepFor was asked for, in order.
  std::vector<duration> Sleeps() const EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  mutable CondVar waiters_changed_;
  mutable time_point now_ GUARDED_BY(mu_);                           // a sleep moves it
  mutable std::multiset<time_point> waiting_until_ GUARDED_BY(mu_);  // the waiters' deadlines
  mutable std::vector<duration> sleeps_ GUARDED_BY(mu_);
};

}  // namespace lakecache::testing
