#include "common/wait_notice.h"

#include <unistd.h>

#include <cstdio>

namespace lakecache {
namespace {

std::string Seconds(Duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + " s";
}

}  // namespace

WaitNotice::WaitNotice(std::string what, WaitNoticeOptions options)
    : what_(std::move(what)), options_(std::move(options)) {
  bool terminal = options_.terminal ? options_.terminal() : ::isatty(STDERR_FILENO) == 1;
  if (!terminal) return;
  thread_ = std::thread([this, start = std::chrono::steady_clock::now()] { Run(start); });
}

WaitNotice::~WaitNotice() { Stop(); }

void WaitNotice::Stop() {
  {
    MutexLock lock(&mu_);
    stopped_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

std::string WaitNotice::Line(std::string_view what, Duration waited, Duration limit) {
  std::string line = "lakecache: still waiting for " + std::string(what) + " (" + Seconds(waited);
  if (limit.count() > 0) line += " of " + Seconds(limit);
  return line + ")";
}

void WaitNotice::Run(std::chrono::steady_clock::time_point start) {
  auto next = start + options_.first;
  for (;;) {
    {
      MutexLock lock(&mu_);
      while (!stopped_ && cv_.WaitUntil(&mu_, next)) {
      }
      if (stopped_) return;
    }
    auto waited = std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - start);
    std::string line = Line(what_, waited, options_.limit);
    if (options_.print) {
      options_.print(line);
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
      std::fflush(stderr);
    }
    next += std::max(options_.every, Duration(1));
  }
}

}  // namespace lakecache
