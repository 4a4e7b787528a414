#include "cli/cluster_launcher.h"

#include "common/scoped_fd.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/scoped_fd.h"

extern char** environ;

namespace lakecache::cli {
namespace {

using Clock = std::chrono::steady_clock;
// How often a process whose exit cannot be watched (no pidfd) is looked at again.
constexpr auto kPollInterval = std::chrono::milliseconds(20);
constexpr auto kKillWait =
    std::chrono::seconds(5);  // a process in uninterruptible I/O takes a while
constexpr size_t kMaxTailBytes = 64 << 10;

Status ErrnoStatus(const std::string& what) {
  return Status::IoError(what + ": " + std::strerror(errno));
}

// "master" or "worker-K": the only names we write, and safe to put in a path.
bool ValidName(const std::string& name) {
  if (name == "master") return true;
  constexpr std::string_view kWorker = "worker-";
  return name.size() > kWorker.size() && name.starts_with(kWorker) &&
         std::all_of(name.begin() + kWorker.size(), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

Result<ClusterProcess> ParsePidsLine(const std::string& line) {
  std::istringstream in(line);
  ClusterProcess process;
  std::string rest;
  if (!(in >> process.name >> process.pid) || (in >> rest) || !ValidName(process.name) ||
      process.pid <= 0) {
    return Status::Corruption("'" + line + "' is not 'master PID' or 'worker-K PID'");
  }
  return process;
}

// Runs in the forked child: only async-signal-safe calls until exec.
[[noreturn]] void ExecDetached(char* const* argv, int in_fd, int out_fd) {
  ::setsid();  // no controlling terminal: a Ctrl-C at the caller's terminal does not reach it
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  for (int sig : {SIGHUP, SIGINT, SIGPIPE, SIGTERM}) ::sigaction(sig, &dfl, nullptr);
  // Copies above 2 first, so dup2 below never copies a descriptor onto itself (keeping CLOEXEC)
  // when the caller started us with 0, 1 or 2 closed.
  int in = ::fcntl(in_fd, F_DUPFD, 3);
  int out = ::fcntl(out_fd, F_DUPFD, 3);
  if (in < 0 || out < 0 || ::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(out, 2) < 0) {
    ::_exit(126);
  }
  ::close_range(3, ~0U, 0);
  ::execve(argv[0], argv, environ);
  constexpr char kMessage[] = "lakecache cluster: cannot exec ";
  [[maybe_unused]] ssize_t n = ::write(2, kMessage, sizeof(kMessage) - 1);
  n = ::write(2, argv[0], std::strlen(argv[0]));
  n = ::write(2, "\n", 1);
  ::_exit(127);
}

std::vector<std::string> ReadCmdline(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::vector<std::string> args;
  for (std::string arg; std::getline(in, arg, '\0');) args.push_back(arg);
  return args;
}

}  // namespace

std::string AddressFilePath(const std::string& dir, const std::string& name) {
  return dir + "/" + name + ".addr";
}
std::string LogFilePath(const std::string& dir, const std::string& name) {
  return dir + "/" + name + ".log";
}
std::string PidsFilePath(const std::string& dir) { return dir + "/cluster.pids"; }

Result<std::vector<ClusterProcess>> ReadPidsFile(const std::string& dir) {
  std::string path = PidsFilePath(dir);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Status::NotFound(path + " does not exist");
  std::ifstream in(path);
  if (!in) return Status::IoError("cannot read " + path);
  std::vector<ClusterProcess> processes;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    Result<ClusterProcess> process = ParsePidsLine(line);
    if (!process.ok()) return process.status().WithContext(path);
    processes.push_back(*process);
  }
  return processes;
}

Status WritePidsFile(const std::string& dir, const std::vector<ClusterProcess>& processes) {
  std::string path = PidsFilePath(dir);
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const ClusterProcess& p : processes) out << p.name << ' ' << p.pid << '\n';
    out.flush();
    if (!out) return Status::IoError("cannot write " + tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) return ErrnoStatus("rename to " + path);
  return Status::Ok();
}

Result<std::string> SelfExecutable() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return Status::IoError("cannot resolve /proc/self/exe: " + ec.message());
  return exe.string();
}

Result<pid_t> SpawnDetached(const std::vector<std::string>& argv, const std::string& log_path) {
  if (argv.empty()) return Status::InvalidArgument("empty argv");
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ScopedFd log_fd(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!log_fd.valid()) return ErrnoStatus("open " + log_path);
  ScopedFd null_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null_fd.valid()) return ErrnoStatus("open /dev/null");
  pid_t pid = ::fork();
  if (pid == 0) ExecDetached(args.data(), null_fd.get(), log_fd.get());
  if (pid < 0) return ErrnoStatus("fork");
  return pid;
}

// A process's exit, as a descriptor that poll() sees readable once the process has exited (a
// pidfd), so that a wait for it needs no polling loop.
struct ProcessExit {
  explicit ProcessExit(pid_t pid) {
    fd.reset(pid > 0 ? static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)) : -1);
    watched = fd.valid() || errno == ESRCH;  // no such process: its exit is behind us
  }
  ScopedFd fd;
  bool watched = false;  // false: the kernel gives no pidfd; look at it every kPollInterval
};

// Returns once one of `exits` not yet over ends, or after `timeout` (kPollInterval at most when
// one cannot be watched, or none is left to wait for).
void WaitForAnExit(const std::vector<ProcessExit>& exits, std::chrono::milliseconds timeout) {
  std::vector<pollfd> fds;
  for (const ProcessExit& e : exits) {
    if (!e.watched) timeout = std::min<std::chrono::milliseconds>(timeout, kPollInterval);
    pollfd over = {e.fd.get(), POLLIN, 0};
    if (e.fd.valid() && ::poll(&over, 1, 0) == 0) fds.push_back(over);  // readable once over
  }
  if (fds.empty()) timeout = std::min<std::chrono::milliseconds>(timeout, kPollInterval);
  ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
}

bool IsRunning(const std::string& dir, const ClusterProcess& process) {
  if (process.pid <= 0) return false;
  pid_t waited = ::waitpid(process.pid, nullptr, WNOHANG);
  if (waited == process.pid) return false;  // our child, and it just exited
  if (waited == 0) return true;             // our child, still running
  // Not our child (or reaped before): trust only a command line that names this cluster's file.
  std::vector<std::string> args = ReadCmdline(process.pid);
  std::string address_file = AddressFilePath(dir, process.name);
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--address-file" && args[i + 1] == address_file) return true;
  }
  return false;
}

std::vector<StopOutcome> StopProcesses(const std::string& dir,
                                       const std::vector<ClusterProcess>& processes,
                                       std::chrono::seconds grace) {
  std::vector<StopOutcome> outcomes(processes.size(), StopOutcome::kNotRunning);
  auto signal_all = [&](int sig, StopOutcome from, StopOutcome to) {
    for (size_t i = 0; i < processes.size(); ++i) {
      if (outcomes[i] != from || !IsRunning(dir, processes[i])) continue;
      outcomes[i] = ::kill(processes[i].pid, sig) == 0 ? to : StopOutcome::kFailed;
    }
  };
  // Waits until no process in state `state` is running; false on timeout.
  auto wait_for = [&](StopOutcome state, Clock::duration timeout) {
    auto deadline = Clock::now() + timeout;
    std::vector<ProcessExit> exits;
    for (size_t i = 0; i < processes.size(); ++i) {
      if (outcomes[i] == state) exits.emplace_back(processes[i].pid);
    }
    while (true) {
      bool any = false;
      for (size_t i = 0; i < processes.size(); ++i) {
        any = any || (outcomes[i] == state && IsRunning(dir, processes[i]));
      }
      if (!any) return true;
      auto left = deadline - Clock::now();
      if (left <= Clock::duration::zero()) return false;
      WaitForAnExit(exits, std::chrono::ceil<std::chrono::milliseconds>(left));
    }
  };
  signal_all(SIGTERM, StopOutcome::kNotRunning, StopOutcome::kStopped);
  if (wait_for(StopOutcome::kStopped, grace)) return outcomes;
  signal_all(SIGKILL, StopOutcome::kStopped, StopOutcome::kKilled);
  if (wait_for(StopOutcome::kKilled, kKillWait)) return outcomes;
  for (size_t i = 0; i < processes.size(); ++i) {
    if (outcomes[i] == StopOutcome::kKilled && IsRunning(dir, processes[i])) {
      outcomes[i] = StopOutcome::kFailed;
    }
  }
  return outcomes;
}

std::string LogTail(const std::string& path, off_t from, int max_lines) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  off_t size = static_cast<off_t>(in.tellg());
  if (from > size) from = 0;  // the log was replaced since
  from = std::max<off_t>(from, size - static_cast<off_t>(kMaxTailBytes));
  in.seekg(from);
  std::string text(static_cast<size_t>(size - from), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  for (int i = 0; i < max_lines; ++i) {
    if (pos == 0) return text;
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) return text;
  }
  return text.substr(pos + 1);
}

}  // namespace lakecache::cli
