#include "common/clock.h"

#include <thread>

namespace lakecache {
namespace {

class RealClock final : public SteadyClock {
 public:
  time_point Now() const override { return std::chrono::steady_clock::now(); }
  bool WaitUntil(CondVar* cv, Mutex* mu, time_point deadline) const override REQUIRES(mu) {
    return cv->WaitUntil(mu, deadline);
  }
  void SleepFor(duration d) const override { std::this_thread::sleep_for(d); }
};

}  // namespace

const SteadyClock* SteadyClock::Real() {
  static const RealClock clock;
  return &clock;
}

}  // namespace lakecache
