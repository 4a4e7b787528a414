#include "support/background_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "support/wait_for.h"

namespace lakecache::testing {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

Result<std::unique_ptr<BackgroundCommand>> BackgroundCommand::Start(
    const std::vector<std::string>& argv, const std::vector<std::string>& extra_env) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return Status::IoError(std::string("pipe: ") + strerror(errno));
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return Status::IoError(std::string("pipe: ") + strerror(errno));
  }
  Result<pid_t> pid = SpawnProcess(argv, extra_env, out[1], err[1]);
  ::close(out[1]);
  ::close(err[1]);
  if (!pid.ok()) {
    ::close(out[0]);
    ::close(err[0]);
    return pid.status();
  }
  std::unique_ptr<BackgroundCommand> command(new BackgroundCommand());
  command->argv_ = argv;
  command->pid_ = *pid;
  command->reader_ =
      std::thread([c = command.get(), o = out[0], e = err[0]] { c->ReadLoop(o, e); });
  return command;
}

BackgroundCommand::~BackgroundCommand() {
  if (pid_ != 0) {
    ::kill(-pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }
  {
    std::lock_guard lock(mu_);
    stop_reading_ = true;
  }
  if (reader_.joinable()) reader_.join();
}

void BackgroundCommand::ReadLoop(int out_fd, int err_fd) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    {
      std::lock_guard lock(mu_);
      if (stop_reading_) break;
    }
    std::string out, err;
    std::string* sinks[2] = {&out, &err};
    if (!DrainPipes(fds, sinks, 50)) continue;
    std::lock_guard lock(mu_);
    out_ += out;
    err_ += err;
  }
  for (pollfd& p : fds) {
    if (p.fd >= 0) ::close(p.fd);
  }
  reader_done_ = true;
}

bool BackgroundCommand::Signal(int signal) { return pid_ != 0 && ::kill(pid_, signal) == 0; }

std::string BackgroundCommand::Stdout() const {
  std::lock_guard lock(mu_);
  return out_;
}

std::string BackgroundCommand::Stderr() const {
  std::lock_guard lock(mu_);
  return err_;
}

RunResult BackgroundCommand::Wait(std::chrono::seconds timeout) {
  RunResult result;
  if (pid_ != 0) {
    auto deadline = Clock::now() + timeout;
    int wait_status = 0;
    bool exited = false;
    while (!exited && Clock::now() < deadline) {
      exited = ::waitpid(pid_, &wait_status, WNOHANG) == pid_;
      if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!exited) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, &wait_status, 0);
      result.timed_out = true;
    }
    exit_code_ = result.timed_out ? -1 : ExitCodeOf(wait_status);
    pid_ = 0;
    // Output written before the exit is still in the pipes: let the reader reach EOF (a busy
    // reader thread may need a while; only a grandchild holding the pipes makes it wait long).
    auto eof_deadline = Clock::now() + kWaitTimeout;
    while (!reader_done_ && Clock::now() < eof_deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  {
    std::lock_guard lock(mu_);
    stop_reading_ = true;
  }
  if (reader_.joinable()) reader_.join();
  result.exit_code = exit_code_;
  result.out = Stdout();
  result.err = Stderr();
  if (result.timed_out) {
    result.err += "\n[BackgroundCommand: killed after " + std::to_string(timeout.count()) +
                  " s timeout: " + JoinArgv(argv_) + "]\n";
  }
  return result;
}

}  // namespace lakecache::testing
