// `lakecache cluster up` / `cluster down`: a master and N workers on loopback, for trying cluster
// mode and for tests. The servers are detached processes (see cluster_launcher.h); DIR/cluster.pids
// is how `down` finds them again, and DIR/master.addr the mounts it unmounts first.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "cli/cluster_launcher.h"
#include "cli/cluster_mounts.h"
#include "cli/cluster_start.h"
#include "cli/commands.h"
#include "cli/metrics_listen.h"
#include "cli/server_main.h"
#include "rpc/grpc_util.h"
#include "security/credentials_dir.h"

namespace lakecache::cli {
namespace {

namespace fs = std::filesystem;

constexpr char kLoopbackAnyPort[] = "127.0.0.1:0";
constexpr auto kMasterStartTimeout = std::chrono::seconds(20);
constexpr auto kWorkersJoinTimeout = std::chrono::seconds(30);
constexpr auto kDownStopGrace = std::chrono::seconds(10);

std::string WorkerName(int k) { return "worker-" + std::to_string(k); }

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

// The folder, created and made absolute (the servers get its paths, `down` matches them).
Result<std::string> PrepareDir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IoError("cannot create " + dir + ": " + ec.message());
  fs::path canonical = fs::canonical(dir, ec);
  if (ec) return Status::IoError(dir + ": " + ec.message());
  return canonical.string();
}

// Held until `up` exits, so two `up`s in one folder cannot both start a cluster. Invalid when
// taken.
ScopedFd LockDir(const std::string& dir) {
  ScopedFd fd(::open((dir + "/cluster.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (fd.valid() && ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) fd.reset();
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
  Result<std::string> master = start.WaitForAddress(kMaster, kMasterStartTimeout);
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
  if (Status s = start.WaitForWorkers(*master, credentials, kWorkersJoinTimeout); !s.ok()) {
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
  ScopedFd lock = LockDir(*dir);
  if (!lock.valid()) {
    return ReportError(
        Status::Unavailable("another `lakecache cluster up` is starting in " + *dir));
  }
  if (int rc = RefuseIfRunning(*dir); rc != kExitOk) return rc;
  RemoveStaleAddressFiles(*dir);
  Result<std::string> exe = SelfExecutable();
  if (!exe.ok()) return ReportError(exe.status());
  CatchInterrupts();
  ClusterStart start(*dir, *exe, ServerFlags(server_flags, server_flags.config_file));
  return StartCluster(start, request, *dir);
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
