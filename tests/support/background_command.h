// A command run to completion in the background, for tests that act while it runs: watch its
// stderr, send it a signal (SIGINT as Ctrl-C would), then collect its exit code and output.
// RunCommand (process.h) captures the same but blocks until the end.
//
// Like every child of the test support, it runs in its own process group and gets SIGKILL when
// the thread that started it exits: start it from the test's main thread. Output is read by a
// thread of its own, so a chatty command never blocks on a full pipe.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"
#include "support/process.h"

namespace lakecache::testing {

class BackgroundCommand {
 public:
  // Runs argv (argv[0] looked up in PATH, no shell) with stdout and stderr on pipes and stdin on
  // /dev/null. `extra_env` as in ChildProcess::Start ("NAME=value" or "-NAME").
  static Result<std::unique_ptr<BackgroundCommand>> Start(
      const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {});
  // Kills the process group if it still runs.
  ~BackgroundCommand();
  BackgroundCommand(const BackgroundCommand&) = delete;
  BackgroundCommand& operator=(const BackgroundCommand&) = delete;

  pid_t pid() const { return pid_; }
  // Sends `signal` to the process (not its group); false if it has been reaped already.
  bool Signal(int signal);
  // What it wrote so far.
  std::string Stdout() const;
  std::string Stderr() const;
  // Waits until it exits (killing its group after `timeout`, then timed_out is set) and its pipes
  // close (a grandchild holding them is not waited for more than kWaitTimeout); exit_code as
  // RunCommand's.
  RunResult Wait(std::chrono::seconds timeout);

 private:
  BackgroundCommand() = default;
  void ReadLoop(int out_fd, int err_fd);

  std::vector<std::string> argv_;
  pid_t pid_ = 0;  // 0 once reaped
  int exit_code_ = -1;
  bool stop_reading_ = false;             // guarded by mu_
  std::atomic<bool> reader_done_{false};  // both pipes at EOF
  mutable std::mutex mu_;
  std::string out_, err_;  // guarded by mu_
  std::thread reader_;
};

}  // namespace lakecache::testing
