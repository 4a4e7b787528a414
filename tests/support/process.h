// Processes for tests: long-running children (servers) and commands run to completion.
//
// Every child runs in its own process group, so stopping it also stops whatever it forked, and gets
// SIGKILL when the thread that started it exits (PR_SET_PDEATHSIG), so a crashed test leaves no
// servers behind. Start children from the test's main thread: a worker thread's exit kills them.
// A ChildProcess is owned by one thread at a time; RunCommand is thread-safe.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"

namespace lakecache::testing {

// A child process whose stdout and stderr are appended to a log file. The destructor stops it.
// The number the first descriptor handed to a child (ChildProcess::Start's pass_fds) has in it.
inline constexpr int kPassedFd = 3;

class ChildProcess {
 public:
  // Runs argv (argv[0] is looked up in PATH, no shell). `extra_env` entries are "NAME=value"
  // (added or overriding) or "-NAME" (removed from the inherited environment).
  // `pass_fds` (at most 8) are the descriptors the child inherits, as kPassedFd, kPassedFd + 1...
  static Result<std::unique_ptr<ChildProcess>> Start(const std::vector<std::string>& argv,
                                                     const std::string& log_path,
                                                     const std::vector<std::string>& extra_env = {},
                                                     const std::vector<int>& pass_fds = {});
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // SIGTERM to the whole process group, up to kWaitTimeout (wait_for.h) to exit, then SIGKILL.
  // Idempotent.
  void Stop();
  // False once the child has exited (it is reaped here).
  bool Running();
  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }
  // The last `max_bytes` of the log, for error messages.
  std::string LogTail(size_t max_bytes = 3000) const;

 private:
  ChildProcess(pid_t pid, std::string log_path) : pid_(pid), log_path_(std::move(log_path)) {}

  pid_t pid_;  // also the process group id; 0 once reaped
  std::string log_path_;
};

struct RunResult {
  int exit_code = -1;  // 128 + signal when killed by a signal; -1 when it could not run
  std::string out;
  std::string err;
  bool timed_out = false;
};

// Runs argv to completion, capturing stdout and stderr separately. `extra_env` as in
// ChildProcess::Start. On timeout the process group is killed, timed_out is set and err says so.
RunResult RunCommand(const std::vector<std::string>& argv,
                     const std::vector<std::string>& extra_env = {},
                     std::chrono::seconds timeout = std::chrono::seconds(120));

// The last `max_bytes` of a file (e.g. a server log) for error messages; "" if unreadable.
std::string ReadFileTail(const std::string& path, size_t max_bytes);

// "argv[0] argv[1] ..." for messages.
std::string JoinArgv(const std::vector<std::string>& argv);

// The building blocks of ChildProcess and RunCommand, for other ways of running children
// (BackgroundCommand, background_command.h).

// Forks and execs argv (argv[0] is looked up in PATH, no shell; `extra_env` as in
// ChildProcess::Start) in a process group of its own, with stdin on /dev/null and stdout and stderr
// on `out_fd` and `err_fd`; the child gets SIGKILL when the calling thread exits. Returns its pid,
// which is also its process group id. The caller still owns (and closes) `out_fd` and `err_fd`.
// `pass_fds` as in ChildProcess::Start.
Result<pid_t> SpawnProcess(const std::vector<std::string>& argv,
                           const std::vector<std::string>& extra_env, int out_fd, int err_fd,
                           const std::vector<int>& pass_fds = {});

// RunResult::exit_code of a waitpid status: the exit code, 128 + signal when killed by a signal,
// else -1.
int ExitCodeOf(int wait_status);

// Waits up to `timeout_ms` for the pipes fds[0] and fds[1] and appends what is available to
// *sinks[0] and *sinks[1], closing a pipe (its fd set to -1) at EOF or on an error. Returns true
// when it read or closed something.
bool DrainPipes(pollfd fds[2], std::string* sinks[2], int timeout_ms);

// True when `pid` has exited: no /proc entry, or a zombie (an orphan where PID 1 does not reap).
bool ProcessGone(pid_t pid);

// Live processes (not this one, not zombies) whose command line contains `text`.
std::vector<pid_t> ProcessesMentioning(const std::string& text);

}  // namespace lakecache::testing
