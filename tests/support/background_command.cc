#include "support/background_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace lakecache::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> MergedEnv(const std::vector<std::string>& extra_env) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  for (const std::string& entry : extra_env) {
    bool unset = !entry.empty() && entry[0] == '-';
    std::string name = unset ? entry.substr(1) : entry.substr(0, entry.find('='));
    std::erase_if(env, [&](const std::string& e) { return e.starts_with(name + "="); });
    if (!unset) env.push_back(entry);
  }
  return env;
}

void WriteStr(int fd, const char* s) { [[maybe_unused]] ssize_t n = ::write(fd, s, strlen(s)); }

int ExitCodeOf(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

}  // namespace

Result<std::unique_ptr<BackgroundCommand>> BackgroundCommand::Start(
    const std::vector<std::string>& argv, const std::vector<std::string>& extra_env) {
  if (argv.empty()) return Status::InvalidArgument("empty argv");
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<std::string> args = argv, env = MergedEnv(extra_env);
  std::vector<char*> c_argv, c_envp;
  for (std::string& a : args) c_argv.push_back(a.data());
  c_argv.push_back(nullptr);
  for (std::string& e : env) c_envp.push_back(e.data());
  c_envp.push_back(nullptr);
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return Status::IoError(std::string("pipe: ") + strerror(errno));
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return Status::IoError(std::string("pipe: ") + strerror(errno));
  }
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    if (null_fd < 0 || ::dup2(null_fd, 0) < 0 || ::dup2(out[1], 1) < 0 || ::dup2(err[1], 2) < 0) {
      ::_exit(126);
    }
    ::close_range(3, ~0U, 0);
    ::execvpe(c_argv[0], c_argv.data(), c_envp.data());
    WriteStr(2, "exec failed (not found or not executable): ");
    WriteStr(2, c_argv[0]);
    WriteStr(2, "\n");
    ::_exit(127);
  }
  int fork_errno = errno;
  if (null_fd >= 0) ::close(null_fd);
  ::close(out[1]);
  ::close(err[1]);
  if (pid < 0) {
    ::close(out[0]);
    ::close(err[0]);
    return Status::IoError(std::string("fork: ") + strerror(fork_errno));
  }
  ::setpgid(pid, pid);
  std::unique_ptr<BackgroundCommand> command(new BackgroundCommand());
  command->argv_ = argv;
  command->pid_ = pid;
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
  char buf[65536];
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    {
      std::lock_guard lock(mu_);
      if (stop_reading_) break;
    }
    if (::poll(fds, 2, 50) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        std::lock_guard lock(mu_);
        (i == 0 ? out_ : err_).append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
      }
    }
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
    // Output written before the exit is still in the pipes: let the reader reach EOF.
    auto eof_deadline = Clock::now() + std::chrono::seconds(2);
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
