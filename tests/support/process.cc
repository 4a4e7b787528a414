#include "support/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include "support/wait_for.h"

extern char** environ;

namespace lakecache::testing {
namespace {

using Clock = std::chrono::steady_clock;

// Everything the child needs, built before fork: after fork only async-signal-safe calls are
// allowed.
struct ExecPlan {
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::vector<char*> argv;
  std::vector<char*> envp;
};

std::vector<std::string> MergeEnv(const std::vector<std::string>& extra_env) {
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

ExecPlan MakePlan(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env) {
  ExecPlan plan{argv, MergeEnv(extra_env), {}, {}};
  for (std::string& a : plan.args) plan.argv.push_back(a.data());
  plan.argv.push_back(nullptr);
  for (std::string& e : plan.env) plan.envp.push_back(e.data());
  plan.envp.push_back(nullptr);
  return plan;
}

void WriteAll(int fd, const char* s) { [[maybe_unused]] ssize_t n = write(fd, s, strlen(s)); }

// Runs in the forked child. Only async-signal-safe calls from here on.
[[noreturn]] void ExecChild(const ExecPlan& plan, pid_t parent, int in_fd, int out_fd, int err_fd,
                            const std::vector<int>& pass_fds) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(126);  // the parent died before prctl took effect
  if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) _exit(126);
  // Out of the way first (a source may be another's target), then in place; dup2 clears
  // FD_CLOEXEC.
  int moved[8];
  size_t passed = std::min<size_t>(pass_fds.size(), 8);
  for (size_t i = 0; i < passed; ++i) {
    moved[i] = fcntl(pass_fds[i], F_DUPFD_CLOEXEC, 100);
    if (moved[i] < 0) _exit(126);
  }
  for (size_t i = 0; i < passed; ++i) {
    if (dup2(moved[i], kPassedFd + static_cast<int>(i)) < 0) _exit(126);
  }
  // Don't leak the test's sockets and pipes into servers.
  close_range(kPassedFd + static_cast<unsigned>(passed), ~0U, 0);
  execvpe(plan.argv[0], plan.argv.data(), plan.envp.data());
  WriteAll(2, "exec failed (not found or not executable): ");
  WriteAll(2, plan.argv[0]);
  WriteAll(2, "\n");
  _exit(127);
}

int RemainingMs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

}  // namespace

Result<pid_t> SpawnProcess(const std::vector<std::string>& argv,
                           const std::vector<std::string>& extra_env, int out_fd, int err_fd,
                           const std::vector<int>& pass_fds) {
  if (argv.empty()) return Status::InvalidArgument("empty argv");
  ExecPlan plan = MakePlan(argv, extra_env);
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) return Status::IoError(std::string("open /dev/null: ") + strerror(errno));
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) ExecChild(plan, parent, null_fd, out_fd, err_fd, pass_fds);
  int fork_errno = errno;
  close(null_fd);
  if (pid < 0) return Status::IoError(std::string("fork: ") + strerror(fork_errno));
  setpgid(pid, pid);  // also in the parent, so a kill(-pid) right after Spawn cannot miss
  return pid;
}

int ExitCodeOf(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

bool DrainPipes(pollfd fds[2], std::string* sinks[2], int timeout_ms) {
  if (poll(fds, 2, timeout_ms) <= 0) return false;
  char buf[65536];
  for (int i = 0; i < 2; ++i) {
    if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    ssize_t n = read(fds[i].fd, buf, sizeof(buf));
    if (n > 0) {
      sinks[i]->append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      close(fds[i].fd);
      fds[i].fd = -1;
    }
  }
  return true;
}

std::string JoinArgv(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

Result<std::unique_ptr<ChildProcess>> ChildProcess::Start(const std::vector<std::string>& argv,
                                                          const std::string& log_path,
                                                          const std::vector<std::string>& extra_env,
                                                          const std::vector<int>& pass_fds) {
  int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return Status::IoError("open " + log_path + ": " + strerror(errno));
  Result<pid_t> pid = SpawnProcess(argv, extra_env, log_fd, log_fd, pass_fds);
  close(log_fd);
  if (!pid.ok()) return pid.status().WithContext(JoinArgv(argv));
  return std::unique_ptr<ChildProcess>(new ChildProcess(*pid, log_path));
}

ChildProcess::~ChildProcess() { Stop(); }

bool ChildProcess::Running() {
  if (pid_ == 0) return false;
  int wait_status = 0;
  if (waitpid(pid_, &wait_status, WNOHANG) == 0) return true;
  kill(-pid_, SIGKILL);  // whatever the leader left behind in its group
  pid_ = 0;
  return false;
}

void ChildProcess::Stop() {
  if (pid_ == 0) return;
  kill(-pid_, SIGTERM);
  // A server's graceful exit (unmounting, writing its queued blocks) is what some tests check: a
  // busy machine must not cut it short.
  auto deadline = Clock::now() + kWaitTimeout;
  bool reaped = false;
  while (!reaped && Clock::now() < deadline) {
    reaped = waitpid(pid_, nullptr, WNOHANG) != 0;
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(-pid_, SIGKILL);
  if (!reaped) waitpid(pid_, nullptr, 0);
  pid_ = 0;
}

std::string ChildProcess::LogTail(size_t max_bytes) const {
  return ReadFileTail(log_path_, max_bytes);
}

std::string ReadFileTail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  return text.size() > max_bytes ? "..." + text.substr(text.size() - max_bytes) : text;
}

RunResult RunCommand(const std::vector<std::string>& argv,
                     const std::vector<std::string>& extra_env, std::chrono::seconds timeout) {
  RunResult result;
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    result.err = std::string("pipe: ") + strerror(errno);
    return result;
  }
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    result.err = std::string("pipe: ") + strerror(errno);
    close(out_pipe[0]);
    close(out_pipe[1]);
    return result;
  }
  Result<pid_t> pid = SpawnProcess(argv, extra_env, out_pipe[1], err_pipe[1]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  if (!pid.ok()) {
    for (pollfd& p : fds) close(p.fd);
    result.err = pid.status().ToString();
    return result;
  }
  std::string* sinks[2] = {&result.out, &result.err};
  auto deadline = Clock::now() + timeout;
  int wait_status = 0;
  bool exited = false;
  while (!exited && Clock::now() < deadline) {
    if (fds[0].fd >= 0 || fds[1].fd >= 0) {
      DrainPipes(fds, sinks, std::min(RemainingMs(deadline), 50));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    exited = waitpid(*pid, &wait_status, WNOHANG) == *pid;
  }
  // Output written before exit is still in the pipes; a grandchild holding them open is not waited
  // for.
  while (exited && DrainPipes(fds, sinks, 0)) {
  }
  if (!exited) {
    kill(-*pid, SIGKILL);
    waitpid(*pid, &wait_status, 0);
    result.timed_out = true;
    result.err += "\n[RunCommand: killed after " + std::to_string(timeout.count()) +
                  " s timeout: " + JoinArgv(argv) + "]\n";
  }
  for (pollfd& p : fds) {
    if (p.fd >= 0) close(p.fd);
  }
  result.exit_code = result.timed_out ? -1 : ExitCodeOf(wait_status);
  return result;
}

bool ProcessGone(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = stat.rfind(')');
  // The state letter follows the command name: 'R', 'S', 'Z'...
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] == 'Z';
}

std::vector<pid_t> ProcessesMentioning(const std::string& text) {
  std::vector<pid_t> pids;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t pid = std::stoi(name);
    std::ifstream in("/proc/" + name + "/cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (pid != ::getpid() && cmdline.find(text) != std::string::npos && !ProcessGone(pid)) {
      pids.push_back(pid);
    }
  }
  return pids;
}

}  // namespace lakecache::testing
