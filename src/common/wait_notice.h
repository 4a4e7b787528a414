// WaitNotice: tells a person at a terminal that a command still waits for a peer that has not
// answered, "lakecache: still waiting for http://10.0.0.5:9000 (8 s of 30 s)", so that a silent
// endpoint (a proxy that drops requests, a half-open load balancer) does not look like a hang.
//
// Lines are printed only when the output is a terminal (a script's log keeps the one error line):
// the first once `first` has passed, then one every `every`, from a thread of the notice's own
// that ends with it (the destructor, or Stop, waits for it). Thread-safe.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <thread>

#include "common/mutex.h"
#include "common/units.h"

namespace lakecache {

struct WaitNoticeOptions {
  Duration first = std::chrono::seconds(3);
  Duration every = std::chrono::seconds(5);
  // The bound the wait has, shown in each line; 0: none shown.
  Duration limit{0};
  // Seams for tests: whether the output is a terminal (default: stderr's isatty), and where a
  // line goes (default: stderr, with a newline).
  std::function<bool()> terminal;
  std::function<void(const std::string& line)> print;
};

class WaitNotice {
 public:
  // `what` names the peer waited for: "http://10.0.0.5:9000", "master 10.0.0.5:7400".
  explicit WaitNotice(std::string what, WaitNoticeOptions options = {});
  ~WaitNotice();
  WaitNotice(const WaitNotice&) = delete;
  WaitNotice& operator=(const WaitNotice&) = delete;

  // The wait is over: no line after this returns.
  void Stop() EXCLUDES(mu_);

  // The line shown `waited` into a wait for `what` bounded by `limit` (0: no bound shown).
  static std::string Line(std::string_view what, Duration waited, Duration limit);

 private:
  void Run(std::chrono::steady_clock::time_point start) EXCLUDES(mu_);

  const std::string what_;
  const WaitNoticeOptions options_;
  Mutex mu_;
  CondVar cv_;
  bool stopped_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // not started when the output is no terminal
};

}  // namespace lakecache
