#include "cli/cluster_start.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "cli/cli_context.h"
#include "cli/commands.h"
#include "cli/credentials_flag.h"
#include "cli/metrics_listen.h"
#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"
#include "security/credentials_dir.h"

namespace lakecache::cli {
namespace {

namespace fs = std::filesystem;
using Clock = ClusterStart::Clock;

constexpr auto kUpStopGrace = std::chrono::seconds(5);
constexpr auto kViewCallTimeout = std::chrono::milliseconds(1000);
constexpr auto kViewAskAgain = std::chrono::milliseconds(100);

// "exited with status 1" / "was killed by signal 9 (Killed)".
std::string DescribeExit(int wait_status) {
  if (WIFEXITED(wait_status)) {
    return "exited with status " + std::to_string(WEXITSTATUS(wait_status));
  }
  int sig = WTERMSIG(wait_status);
  return "was killed by signal " + std::to_string(sig) + " (" + ::strsignal(sig) + ")";
}

// Set by SIGINT/SIGTERM/SIGHUP while `up` waits, so it stops what it started instead of dying;
// the pipe wakes a wait.
volatile std::sig_atomic_t g_interrupted = 0;
int g_interrupt_pipe[2] = {-1, -1};
void OnInterrupt(int) {
  g_interrupted = 1;
  if (g_interrupt_pipe[1] >= 0) (void)!::write(g_interrupt_pipe[1], "x", 1);
}

}  // namespace

void CatchInterrupts() {
  if (g_interrupt_pipe[0] < 0) (void)!::pipe2(g_interrupt_pipe, O_CLOEXEC | O_NONBLOCK);
  struct sigaction sa = {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGHUP, SIGINT, SIGTERM}) ::sigaction(sig, &sa, nullptr);
}

// The bound HOST:PORT a server wrote to `path`; "" until it is there.
std::string ReadAddress(const std::string& path) {
  std::ifstream in(path);
  std::string address;
  in >> address;
  size_t colon = address.rfind(':');
  bool has_port = colon != std::string::npos && colon + 1 < address.size() &&
                  std::all_of(address.begin() + colon + 1, address.end(),
                              [](char c) { return c >= '0' && c <= '9'; });
  return has_port ? address : "";
}

ClusterStart::ClusterStart(std::string dir, std::string exe, std::vector<std::string> server_flags)
    : dir_(std::move(dir)),
      exe_(std::move(exe)),
      server_flags_(std::move(server_flags)),
      dir_events_(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK)) {
  if (dir_events_.valid()) {
    ::inotify_add_watch(dir_events_.get(), dir_.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO);
  }
}

ClusterStart::~ClusterStart() = default;

void ClusterStart::WaitForEvent(Clock::time_point deadline) {
  std::vector<pollfd> polls = {{dir_events_.get(), POLLIN, 0}, {g_interrupt_pipe[0], POLLIN, 0}};
  for (const Started& s : started_) polls.push_back({s.exited.get(), POLLIN, 0});
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  if (::poll(polls.data(), polls.size(), static_cast<int>(std::max<int64_t>(0, left.count()))) <=
      0) {
    return;
  }
  char drain[4096];
  for (int fd : {dir_events_.get(), g_interrupt_pipe[0]}) {
    while (fd >= 0 && ::read(fd, drain, sizeof(drain)) > 0) {
    }
  }
}

Status ClusterStart::Start(const std::string& name, const std::vector<std::string>& role_args) {
  std::string log = LogFilePath(dir_, name);
  std::vector<std::string> argv = {exe_};
  argv.insert(argv.end(), server_flags_.begin(), server_flags_.end());
  argv.insert(argv.end(), {"--log-file", log});
  argv.insert(argv.end(), role_args.begin(), role_args.end());
  std::error_code ec;
  uintmax_t size = fs::exists(log, ec) ? fs::file_size(log, ec) : 0;
  Result<pid_t> pid = SpawnDetached(argv, log);
  if (!pid.ok()) return pid.status().WithContext("starting " + name);
  started_.push_back({{name, *pid},
                      ec ? 0 : static_cast<off_t>(size),
                      "",
                      ScopedFd(static_cast<int>(::syscall(SYS_pidfd_open, *pid, 0)))});
  std::vector<ClusterProcess> processes;
  for (const Started& s : started_) processes.push_back(s.process);
  return WritePidsFile(dir_, processes);
}

Status ClusterStart::CheckRunning() {
  if (g_interrupted) return Status::Unavailable("interrupted before the cluster was up");
  for (Started& s : started_) {
    int wait_status = 0;
    if (::waitpid(s.process.pid, &wait_status, WNOHANG) != s.process.pid) continue;
    blame_ = s.process.name;
    return Status::Unavailable(s.process.name + " (pid " + std::to_string(s.process.pid) + ") " +
                               DescribeExit(wait_status) + " before the cluster was up");
  }
  return Status::Ok();
}

Status ClusterStart::Timeout(const std::string& blame, const std::string& message) {
  blame_ = blame;
  return Status::DeadlineExceeded(message);
}

Result<std::string> ClusterStart::WaitForAddress(const std::string& name,
                                                 std::chrono::seconds timeout) {
  Clock::time_point deadline = Clock::now() + timeout;
  std::string path = AddressFilePath(dir_, name);
  while (true) {
    LC_RETURN_IF_ERROR(CheckRunning());
    std::string address = ReadAddress(path);
    if (!address.empty()) {
      for (Started& s : started_) {
        if (s.process.name == name) s.address = address;
      }
      return address;
    }
    if (Clock::now() >= deadline) {
      return Timeout(name, name + " did not write " + path + " within " +
                               std::to_string(timeout.count()) + " s");
    }
    WaitForEvent(deadline);
  }
}

Status ClusterStart::WaitForWorkers(const std::string& master_address,
                                    const std::string& credentials, std::chrono::seconds timeout) {
  Clock::time_point deadline = Clock::now() + timeout;
  // Opened after the last fork: gRPC's threads and forking do not mix.
  LC_ASSIGN_OR_RETURN(auto admin,
                      OpenCredentials(credentials, security::Role::kAdmin, "lakecache cluster up"));
  auto stub = rpc::MasterService::NewStub(security::MasterChannel(master_address, admin.get()));
  int workers = static_cast<int>(started_.size()) - 1;
  std::string last;  // what the last look found, for the timeout message
  while (true) {
    LC_RETURN_IF_ERROR(CheckRunning());
    std::string missing;
    for (Started& s : started_) {
      if (s.address.empty()) s.address = ReadAddress(AddressFilePath(dir_, s.process.name));
      if (s.address.empty() && missing.empty()) missing = s.process.name;
    }
    if (!missing.empty()) {
      last = missing + " has not written its address yet";
    } else {
      grpc::ClientContext context;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      rpc::SetTimeout(&context, std::clamp(left, std::chrono::milliseconds(1), kViewCallTimeout));
      rpc::ClusterView view;
      grpc::Status s = stub->GetClusterView(&context, rpc::ClusterViewRequest(), &view);
      if (s.ok() && view.workers_size() >= workers) return Status::Ok();
      last = s.ok() ? "it lists " + std::to_string(view.workers_size())
                    : rpc::FromGrpcStatus(s, "master " + master_address).message();
    }
    if (Clock::now() >= deadline) {
      return Timeout(missing.empty() ? kMaster : missing,
                     "the master did not list all " + std::to_string(workers) + " workers within " +
                         std::to_string(timeout.count()) + " s (" + last + ")");
    }
    // A missing address file comes as an event; the master's view does not (no call of the
    // master waits for a change of it), so it is asked again after a pause.
    WaitForEvent(missing.empty() ? std::min(deadline, Clock::now() + kViewAskAgain) : deadline);
  }
}

void ClusterStart::PrintReady(const std::string& credentials,
                              const std::string& metrics_listen) const {
  for (const Started& s : started_) {
    std::printf("%s %s pid %d log %s\n", s.process.name.c_str(), s.address.c_str(), s.process.pid,
                LogFilePath(dir_, s.process.name).c_str());
  }
  if (credentials.empty()) {
    std::printf("plain text, no authentication (--insecure): loopback only\n");
  } else {
    std::printf("TLS and role tokens on every call; clients take --credentials %s (or %s=%s)\n",
                credentials.c_str(), kCredentialsEnv, credentials.c_str());
  }
  if (!metrics_listen.empty()) {
    // The master asks for the token whenever the folder has one (metrics_listen.h).
    std::string token = credentials + "/" + kMetricsTokenFile;
    bool guarded = !credentials.empty() && ::access(token.c_str(), R_OK) == 0;
    std::string how = guarded ? ", with the token in " + token +
                                    " as the password (any user name) or as \"Authorization: "
                                    "Bearer TOKEN\""
                              : "";
    std::printf("status page http://%s/ and /metrics%s\n", metrics_listen.c_str(), how.c_str());
  }
  std::printf("%s\n", started_.front().address.c_str());
  std::fflush(stdout);
}

// Stops the workers, then the master (so workers do not log a vanished master).
std::vector<StopOutcome> StopCluster(const std::string& dir,
                                     const std::vector<ClusterProcess>& processes,
                                     std::chrono::seconds grace) {
  std::vector<ClusterProcess> workers, masters;
  for (const ClusterProcess& p : processes) (p.name == kMaster ? masters : workers).push_back(p);
  std::vector<StopOutcome> outcomes = StopProcesses(dir, workers, grace);
  std::vector<StopOutcome> master_outcomes = StopProcesses(dir, masters, grace);
  // Back in the order of `processes`.
  std::vector<StopOutcome> ordered;
  size_t w = 0, m = 0;
  for (const ClusterProcess& p : processes) {
    ordered.push_back(p.name == kMaster ? master_outcomes[m++] : outcomes[w++]);
  }
  return ordered;
}

// Removes the pids file and the address files of `processes`.
void ForgetCluster(const std::string& dir, const std::vector<ClusterProcess>& processes) {
  std::error_code ec;
  for (const ClusterProcess& p : processes) fs::remove(AddressFilePath(dir, p.name), ec);
  fs::remove(PidsFilePath(dir), ec);
}

int ClusterStart::Fail(const Status& why) {
  std::fprintf(stderr, "lakecache: error: cluster up: %s\n", why.message().c_str());
  for (const Started& s : started_) {
    if (s.process.name != blame_) continue;
    std::string log = LogFilePath(dir_, s.process.name);
    std::string tail = LogTail(log, s.log_start);
    std::fprintf(stderr, "last lines of %s:\n%s%s", log.c_str(), tail.empty() ? "(empty)\n" : "",
                 tail.c_str());
    if (!tail.empty() && tail.back() != '\n') std::fputc('\n', stderr);
  }
  std::vector<ClusterProcess> processes;
  for (const Started& s : started_) processes.push_back(s.process);
  StopCluster(dir_, processes, kUpStopGrace);
  ForgetCluster(dir_, processes);
  std::fprintf(stderr, "lakecache: stopped the %zu process(es) it had started\n", processes.size());
  return kExitFailure;
}

}  // namespace lakecache::cli
