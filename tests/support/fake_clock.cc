#include "support/fake_clock.h"

#include <iterator>

#include "support/slowdown.h"

namespace lakecache::testing {
namespace {

// How long a waiter sleeps in real time before it returns to look at its condition and the fake
// time again: an Advance does not know the waiters' condition variables.
constexpr auto kWaiterSlice = std::chrono::milliseconds(1);

}  // namespace

FakeClock::FakeClock() : now_(std::chrono::steady_clock::now()) {}

SteadyClock::time_point FakeClock::Now() const {
  MutexLock lock(&mu_);
  return now_;
}

bool FakeClock::WaitUntil(CondVar* cv, Mutex* mu, time_point deadline) const {
  std::multiset<time_point>::iterator waiting;
  {
    MutexLock lock(&mu_);
    waiting = waiting_until_.insert(deadline);
    waiters_changed_.SignalAll();
  }
  // One slice, then back to the caller as a spurious wakeup would: it checks its condition again
  // (a signal sent while it was not waiting is not lost for good, as it would be if this looped).
  if (Now() < deadline) cv->WaitUntil(mu, std::chrono::steady_clock::now() + kWaiterSlice);
  MutexLock lock(&mu_);
  waiting_until_.erase(waiting);
  waiters_changed_.SignalAll();
  return now_ < deadline;
}

void FakeClock::SleepFor(duration d) const {
  MutexLock lock(&mu_);
  sleeps_.push_back(d);
  now_ += d;
}

void FakeClock::Advance(duration d) {
  {
    MutexLock lock(&mu_);
    now_ += d;
  }
  waiters_changed_.SignalAll();
}

bool FakeClock::WaitForWaiters(int n) const {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30) * kSlowdown;
  MutexLock lock(&mu_);
  auto waiting = [&]() REQUIRES(mu_) {
    return std::distance(waiting_until_.upper_bound(now_), waiting_until_.end());
  };
  while (waiting() < n) {
    if (!waiters_changed_.WaitUntil(&mu_, deadline)) return waiting() >= n;
  }
  return true;
}

std::vector<SteadyClock::duration> FakeClock::Sleeps() const {
  MutexLock lock(&mu_);
  return sleeps_;
}

}  // namespace lakecache::testing
