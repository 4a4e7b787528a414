// WaitFor: the one way a test waits for something another thread or process does (a file, a
// port, a log line, a counter): it polls the condition until it holds or a generous deadline
// passes, so a loaded machine makes the test slower, never wrong. Not for "nothing more
// happened": wait for the event that proves the step that could have done it has finished.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

#include "support/slowdown.h"

namespace lakecache::testing {

// Long enough for any step a test waits for on two busy cores.
inline constexpr std::chrono::milliseconds kWaitTimeout = std::chrono::seconds(30) * kSlowdown;

// True once `done()` holds; false if it still does not after `timeout`.
inline bool WaitFor(const std::function<bool()>& done,
                    std::chrono::milliseconds timeout = kWaitTimeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace lakecache::testing
