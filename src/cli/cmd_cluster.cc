// `lakecache cluster up` / `cluster down`: a master and N workers on loopback, for trying cluster
// mode and for tests. The servers are detached processes (see cluster_launcher.h); DIR/cluster.pids
// is how `down` finds them again, and DIR/master.addr the mounts it unmounts first.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <thread>

#include "cli/cluster_launcher.h"
#include "cli/cluster_mounts.h"
#include "cli/commands.h"
#include "cli/credentials_flag.h"
#include "cli/metrics_listen.h"
#include "cli/server_main.h"
#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"
#include "security/credentials_dir.h"

namespace lakecache::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr char kMaster[] = "master";
constexpr char kLoopbackAnyPort[] = "127.0.0.1:0";
constexpr auto kMasterStartTimeout = std::chrono::seconds(20);
constexpr auto kWorkersJoinTimeout = std::chrono::seconds(30);
constexpr auto kUpStopGrace = std::chrono::seconds(5);
constexpr auto kDownStopGrace = std::chrono::seconds(10);
constexpr auto kPollInterval = std::chrono::milliseconds(20);
constexpr auto kViewCallTimeout = std::chrono::milliseconds(1000);

// Set by SIGINT/SIGTERM/SIGHUP while `up` waits, so it stops what it started instead of dying.
volatile std::sig_atomic_t g_interrupted = 0;
void OnInterrupt(int) { g_interrupted = 1; }

void CatchInterrupts() {
  struct sigaction sa = {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGHUP, SIGINT, SIGTERM}) ::sigaction(sig, &sa, nullptr);
}

std::string WorkerName(int k) { return "worker-" + std::to_string(k); }

// "exited with status 1" / "was killed by signal 9 (Killed)".
std::string DescribeExit(int wait_status) {
  if (WIFEXITED(wait_status)) {
    return "exited with status " + std::to_string(WEXITSTATUS(wait_status));
  }
  int sig = WTERMSIG(wait_status);
  return "was killed by signal " + std::to_string(sig) + " (" + ::strsignal(sig) + ")";
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

// Global flags every server of the cluster gets: the config (absolute: the servers outlive the
// caller's notion of "here"), overrides, store flags, and the log level (info unless one was
// asked for: the CLI's default, warn, would leave the servers' logs nearly empty).
std::vector<std::string> ServerFlags(const GlobalFlags& flags, const std::string& config) {
  std::vector<std::string> out = {"--config", config};
  for (const std::string& o : flags.overrides) out.insert(out.end(), {"-o", o});
  if (!flags.endpoint.empty()) out.insert(out.end(), {"--endpoint", flags.endpoint});
  if (!flags.region.empty()) out.insert(out.end(), {"--region", flags.region});
  if (flags.path_style) out.push_back("--path-style");
  if (!flags.ca_bundle.empty()) {
    std::error_code ec;
    out.insert(out.end(), {"--ca-bundle", fs::absolute(flags.ca_bundle, ec).string()});
  }
  GlobalFlags defaults;
  out.insert(out.end(),
             {"--log-level", flags.log_level == defaults.log_level ? "info" : flags.log_level});
  return out;
}

// A cluster being started: what runs so far, and why the start failed.
class ClusterStart {
 public:
  ClusterStart(std::string dir, std::string exe, std::vector<std::string> server_flags)
      : dir_(std::move(dir)), exe_(std::move(exe)), server_flags_(std::move(server_flags)) {}

  // Starts `name` with `role_args` (the subcommand and its flags) and records its pid.
  Status Start(const std::string& name, const std::vector<std::string>& role_args);
  // Waits for `name`'s address file; the address.
  Result<std::string> WaitForAddress(const std::string& name, Clock::time_point deadline);
  // Waits until every worker wrote its address and the master lists them all.
  Status WaitForWorkers(const std::string& master_address, const std::string& credentials,
                        Clock::time_point deadline);
  // One line per server, where the credentials are and where the status page is (with
  // --metrics-listen), then the master's address alone.
  void PrintReady(const std::string& credentials, const std::string& metrics_listen) const;
  // Reports `why` with the log of the process to blame, stops everything, forgets the cluster.
  int Fail(const Status& why);

 private:
  struct Started {
    ClusterProcess process;
    off_t log_start = 0;  // where this run's output begins in the log
    std::string address;
  };

  // kUnavailable naming the process when one has exited; also on SIGINT/SIGTERM.
  Status CheckRunning();
  Status Timeout(const std::string& blame, const std::string& message);

  std::string dir_;
  std::string exe_;
  std::vector<std::string> server_flags_;
  std::vector<Started> started_;  // the master first
  std::string blame_;             // whose log explains the failure; "" for none
};

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
  started_.push_back({{name, *pid}, ec ? 0 : static_cast<off_t>(size), ""});
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
                                                 Clock::time_point deadline) {
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
                               std::to_string(kMasterStartTimeout.count()) + " s");
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

Status ClusterStart::WaitForWorkers(const std::string& master_address,
                                    const std::string& credentials, Clock::time_point deadline) {
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
                         std::to_string(kWorkersJoinTimeout.count()) + " s (" + last + ")");
    }
    std::this_thread::sleep_for(kPollInterval * 5);
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

// The folder, created and made absolute (the servers get its paths, `down` matches them).
Result<std::string> PrepareDir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IoError("cannot create " + dir + ": " + ec.message());
  fs::path canonical = fs::canonical(dir, ec);
  if (ec) return Status::IoError(dir + ": " + ec.message());
  return canonical.string();
}

// Held until `up` exits, so two `up`s in one folder cannot both start a cluster. -1 when taken.
int LockDir(const std::string& dir) {
  int fd = ::open((dir + "/cluster.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// kExitOk when no process of DIR/cluster.pids still runs.
int RefuseIfRunning(const std::string& dir) {
  Result<std::vector<ClusterProcess>> recorded = ReadPidsFile(dir);
  if (!recorded.ok()) {
    if (recorded.status().code() == StatusCode::kNotFound) return kExitOk;
    return ReportError(recorded.status().WithContext("remove it if no cluster is running"));
  }
  bool running = std::any_of(recorded->begin(), recorded->end(),
                             [&](const ClusterProcess& p) { return IsRunning(dir, p); });
  if (!running) return kExitOk;
  pid_t master = recorded->front().pid;
  for (const ClusterProcess& p : *recorded) {
    if (p.name == kMaster) master = p.pid;
  }
  std::fprintf(stderr,
               "lakecache: error: a cluster is already running in %s (master pid %d); stop it "
               "with `lakecache cluster down --dir %s`\n",
               dir.c_str(), master, dir.c_str());
  return kExitFailure;
}

// --metrics-listen: a port of its own (the status page's address is printed), on loopback unless
// the cluster has credentials, whose metrics token then guards it.
Status CheckMetricsListen(const ClusterUpRequest& request) {
  const std::string& listen = request.metrics_listen;
  if (listen.empty()) return Status::Ok();
  LC_RETURN_IF_ERROR(rpc::CheckListenAddress("--metrics-listen", listen));
  if (listen.ends_with(":0")) {
    return Status::InvalidArgument("--metrics-listen " + listen +
                                   ": give a port, e.g. 127.0.0.1:9460 (the status page's "
                                   "address is printed, and port 0 would be known to nobody)");
  }
  if (request.insecure && !IsLoopbackListen(listen)) {
    return Status::InvalidArgument(
        "--metrics-listen " + listen +
        " is not a loopback address, and `cluster up --insecure` serves on loopback only "
        "(without --insecure, the status page asks for the token in DIR/metrics.token)");
  }
  return Status::Ok();
}

// Checks what can be checked before starting anything: the config and the flags.
Status CheckRequest(const GlobalFlags& flags, const ClusterUpRequest& request,
                    const std::string& dir) {
  LC_RETURN_IF_ERROR(CheckMetricsListen(request));
  LC_ASSIGN_OR_RETURN(Config config, CliContext(flags).LoadConfig());
  if (config.namespaces.empty()) {
    return Status::InvalidArgument(flags.config_file + ": no namespaces for the master to serve");
  }
  CacheFlags cache_flags = request.cache_flags;
  cache_flags.cache_dir = dir + "/" + WorkerName(1) + "/cache";
  LC_RETURN_IF_ERROR(ApplyCacheFlags(cache_flags, &config.cache));
  WarnCacheBeyondDisk(config.cache);  // once, for every worker: they share the disk
  return Status::Ok();
}

int StartCluster(ClusterStart& start, const ClusterUpRequest& request, const std::string& dir) {
  // TLS unless asked not to: the CA, the master's certificate and the role tokens live in DIR
  // (made on the first `up`, kept after), and every server and client command is given DIR.
  std::string credentials;
  std::vector<std::string> secure;
  if (!request.insecure) {
    credentials = dir;
    security::CredentialOptions options;
    if (Status s = security::MakeCredentials(credentials, options); !s.ok()) {
      return start.Fail(s.WithContext("credentials in " + credentials));
    }
    secure = {"--credentials", credentials};
  }
  std::vector<std::string> master_args = {kMaster, "--listen", kLoopbackAnyPort, "--address-file",
                                          AddressFilePath(dir, kMaster)};
  master_args.insert(master_args.end(), secure.begin(), secure.end());
  if (!request.metrics_listen.empty()) {
    master_args.insert(master_args.end(), {"--metrics-listen", request.metrics_listen});
  }
  if (Status s = start.Start(kMaster, master_args); !s.ok()) return start.Fail(s);
  Result<std::string> master = start.WaitForAddress(kMaster, Clock::now() + kMasterStartTimeout);
  if (!master.ok()) return start.Fail(master.status());
  for (int k = 1; k <= request.workers; ++k) {
    std::string name = WorkerName(k);
    std::string cache_dir = dir + "/" + name + "/cache";
    std::error_code ec;
    fs::create_directories(cache_dir, ec);
    if (ec) return start.Fail(Status::IoError("cannot create " + cache_dir + ": " + ec.message()));
    std::vector<std::string> args = {"worker",
                                     "--master",
                                     *master,
                                     "--listen",
                                     kLoopbackAnyPort,
                                     "--address-file",
                                     AddressFilePath(dir, name),
                                     "--cache-dir",
                                     cache_dir};
    const CacheFlags& cache = request.cache_flags;
    if (!cache.cache_size.empty()) args.insert(args.end(), {"--cache-size", cache.cache_size});
    if (!cache.mem_cache.empty()) args.insert(args.end(), {"--mem-cache", cache.mem_cache});
    args.insert(args.end(), secure.begin(), secure.end());
    if (Status s = start.Start(name, args); !s.ok()) return start.Fail(s);
  }
  if (Status s = start.WaitForWorkers(*master, credentials, Clock::now() + kWorkersJoinTimeout);
      !s.ok()) {
    return start.Fail(s);
  }
  start.PrintReady(credentials, request.metrics_listen);
  return kExitOk;
}

// Address files left by a cluster that died without `down`: they would be read as fresh.
void RemoveStaleAddressFiles(const std::string& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& path = it->path();
    std::string stem = path.stem().string();
    if (path.extension() == ".addr" && (stem == kMaster || stem.starts_with("worker-"))) {
      fs::remove(path, ec);
    }
  }
}

}  // namespace

int RunClusterUp(const GlobalFlags& flags, const ClusterUpRequest& request) {
  if (flags.config_file.empty()) {
    std::fprintf(stderr,
                 "lakecache: error: cluster up needs --config FILE (the namespaces the master "
                 "serves): `lakecache --config lake.yaml cluster up --dir DIR`\n");
    return kExitUsage;
  }
  if (request.workers < 1) return ReportError(Status::InvalidArgument("--workers: at least 1"));
  GlobalFlags server_flags = flags;
  std::error_code ec;
  server_flags.config_file = fs::absolute(flags.config_file, ec).lexically_normal().string();
  if (ec) return ReportError(Status::IoError(flags.config_file + ": " + ec.message()));
  Result<std::string> dir = PrepareDir(request.dir);
  if (!dir.ok()) return ReportError(dir.status());
  if (Status s = CheckRequest(server_flags, request, *dir); !s.ok()) return ReportError(s);
  int lock = LockDir(*dir);
  if (lock < 0) {
    return ReportError(
        Status::Unavailable("another `lakecache cluster up` is starting in " + *dir));
  }
  if (int rc = RefuseIfRunning(*dir); rc != kExitOk) return rc;
  RemoveStaleAddressFiles(*dir);
  Result<std::string> exe = SelfExecutable();
  if (!exe.ok()) return ReportError(exe.status());
  CatchInterrupts();
  ClusterStart start(*dir, *exe, ServerFlags(server_flags, server_flags.config_file));
  int rc = StartCluster(start, request, *dir);
  ::close(lock);
  return rc;
}

int RunClusterDown(const std::string& dir_arg) {
  std::error_code ec;
  if (!fs::is_directory(dir_arg, ec)) {
    std::fprintf(stderr, "lakecache: error: %s: no such folder\n", dir_arg.c_str());
    return kExitUsage;
  }
  std::string dir = fs::canonical(dir_arg, ec).string();
  Result<std::vector<ClusterProcess>> processes = ReadPidsFile(dir);
  if (!processes.ok() && processes.status().code() == StatusCode::kNotFound) {
    std::printf("no cluster is running in %s\n", dir.c_str());
    return kExitOk;
  }
  if (!processes.ok()) return ReportError(processes.status());
  // The mounts first, while their servers still answer: each drains, and none is left to fail
  // every access once the servers are gone.
  bool unmount_failed = false;
  if (std::string master = ReadAddress(AddressFilePath(dir, kMaster)); !master.empty()) {
    unmount_failed = !UnmountClusterMounts(MountsOfCluster(master));
  }
  std::vector<StopOutcome> outcomes = StopCluster(dir, *processes, kDownStopGrace);
  bool stop_failed = false;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const char* name = (*processes)[i].name.c_str();
    int pid = (*processes)[i].pid;
    switch (outcomes[i]) {
      case StopOutcome::kNotRunning:
        std::printf("%s (pid %d) was not running\n", name, pid);
        break;
      case StopOutcome::kStopped:
        std::printf("stopped %s (pid %d)\n", name, pid);
        break;
      case StopOutcome::kKilled:
        std::printf("killed %s (pid %d): still running %lld s after SIGTERM\n", name, pid,
                    static_cast<long long>(kDownStopGrace.count()));
        break;
      case StopOutcome::kFailed:
        std::fprintf(stderr, "lakecache: error: could not stop %s (pid %d)\n", name, pid);
        stop_failed = true;
        break;
    }
  }
  if (stop_failed) return kExitFailure;  // keep cluster.pids: `down` again once it can be stopped
  ForgetCluster(dir, *processes);
  return unmount_failed ? kExitFailure : kExitOk;
}

}  // namespace lakecache::cli
