// `lakecache mount` and `lakecache holder`: how a mount runs (held and supervised in the
// foreground or as a daemon, a held server, a takeover); the stack itself is built by
// mount/mount_assembly.h from what mount_prepare.h makes of the flags.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <memory>

#include "cli/cluster_launcher.h"
#include "cli/commands.h"
#include "cli/metrics_listen.h"
#include "cli/mount_options.h"
#include "cli/mount_prepare.h"
#include "common/logging.h"
#include "common/mount_table.h"
#include "common/rendezvous.h"
#include "common/scoped_fd.h"
#include "mount/holder_link.h"
#include "mount/mount_assembly.h"
#include "mount/mount_holder.h"

namespace lakecache::cli {
namespace {

// The most of a mountpoint's name a default log file's name carries (its end).
constexpr size_t kLogNameMax = 48;

// A mount's stack and its /metrics endpoint, which goes first.
struct Mounted {
  AssembledMount stack;
  std::unique_ptr<HttpEndpoint> metrics_endpoint;
};

// Builds the stack on `sources` and serves the connection: the holder's (`link`), the inherited
// --fuse-fd, or a mount of its own; then the /metrics endpoint.
Result<Mounted> Finish(MountSources sources, const MountRequest& req, const MountOptions& options,
                       HolderLink* link, std::unique_ptr<metrics::Registry> registry) {
  LC_ASSIGN_OR_RETURN(HttpEndpointOptions metrics_options,
                      MetricsEndpointOptions("lakecache mount", req.metrics_listen, req.credentials,
                                             req.insecure, true));
  MountSpec spec = SpecFor(req, options);
  spec.link = link;
  Mounted mounted;
  LC_ASSIGN_OR_RETURN(mounted.stack, AssembleMount(std::move(sources), spec, std::move(registry)));
  if (mounted.stack.metrics != nullptr) {
    // A server that takes over from another waits for its predecessor to let the port go.
    LC_ASSIGN_OR_RETURN(
        mounted.metrics_endpoint,
        ServeMetrics(metrics_options, mounted.stack.metrics.get(), {}, std::chrono::seconds(10)));
  }
  return mounted;
}

// Serves until unmounted (or stopped for a successor); then the /metrics endpoint, the control
// socket and the collector go, and the cache's figures go to the log.
Status Serve(Mounted& mounted) {
  return ServeMount(mounted.stack, [&mounted] { mounted.metrics_endpoint.reset(); });
}

void DetachStdio() {
  int devnull = ::open("/dev/null", O_RDWR);
  ::dup2(devnull, STDIN_FILENO);
  ::dup2(devnull, STDOUT_FILENO);
  ::dup2(devnull, STDERR_FILENO);
  if (devnull > STDERR_FILENO) ::close(devnull);
}

// A server of a held mount (--holder SOCKET): prepares, asks the holder for the connection (the
// previous server, if any, stops first), finishes the stack and serves until unmounted or told
// that a successor waits.
int RunHeldServer(const CliContext& ctx, const MountRequest& req, const MountOptions& options) {
  std::unique_ptr<metrics::Registry> registry = MakeMetricsRegistry(req.metrics_listen);
  auto prepared = PrepareMount(ctx, req, registry.get());
  if (!prepared.ok()) return ReportError(prepared.status());
  std::string mountpoint = NormalizedPath(req.mountpoint);
  MountRequest held = req;
  held.mountpoint = mountpoint;
  FuseMountOptions fuse = FuseOptionsFor(req, options);
  fuse.read_only = !MountWrites(*prepared, options.fs.read_only);
  auto link = HolderLink::Connect(req.holder, mountpoint, FuseMountOptionString(fuse),
                                  options.fuse_descriptors, std::chrono::seconds(30));
  if (!link.ok()) return ReportError(link.status());
  auto mounted = Finish(std::move(*prepared), held, options, link->get(), std::move(registry));
  if (!mounted.ok()) return ReportError(mounted.status());
  FuseMount* mount = mounted->stack.mount.get();
  (*link)->Watch([mount] { mount->Stop(); },
                 [mountpoint] {
                   spdlog::warn(
                       "the holder of {} is gone: the mount serves on, but it ends with "
                       "this process",
                       mountpoint);
                 });
  if (req.background) DetachStdio();  // the holder told the caller; the log has the rest
  Status s = Serve(*mounted);
  (*link)->Unwatch();  // before the mount its callback stops goes
  spdlog::default_logger()->flush();
  return s.ok() ? kExitOk : ReportError(s);
}

// The command line of the servers a supervising holder starts: this one's, serving through the
// holder at `socket`, logging where the holder does.
Result<std::vector<std::string>> ServerArgv(const CliContext& ctx, const MountRequest& req,
                                            const std::string& socket) {
  LC_ASSIGN_OR_RETURN(std::string exe, SelfExecutable());
  std::vector<std::string> argv = {exe};
  if (req.background && ctx.flags().log_file.empty()) {
    argv.insert(argv.end(), {"--log-file", DefaultMountLogFile(req.mountpoint)});
  }
  argv.insert(argv.end(), req.argv.begin() + (req.argv.empty() ? 0 : 1), req.argv.end());
  argv.insert(argv.end(), {"--holder", socket});
  return argv;
}

// `lakecache mount`: this process holds the mount (mount/mount_holder.h) and supervises its
// server; `on_serving` runs once the first server serves.
int RunSupervised(const CliContext& ctx, const MountRequest& req,
                  std::function<void()> on_serving) {
  MountHolderOptions holder;
  holder.socket_path = HolderSocketPath(NormalizedPath(req.mountpoint));
  holder.mount = MountHeldConnection;
  auto argv = ServerArgv(ctx, req, holder.socket_path);
  if (!argv.ok()) return ReportError(argv.status());
  holder.server_argv = std::move(*argv);
  holder.on_serving = std::move(on_serving);
  int server_exit = -1;
  Status s = RunMountHolder(holder, &server_exit);
  if (server_exit > 0) return server_exit;  // it said why
  return s.ok() ? kExitOk : ReportError(s);
}

int RunForeground(const CliContext& ctx, const MountRequest& req) {
  return RunSupervised(ctx, req, [&req] {
    std::fprintf(stderr, "lakecache: mounted at %s\n", req.mountpoint.c_str());
  });
}

// What a mount shows, as `mount --background` says it: the URI, the cluster or the config.
std::string MountSource(const CliContext& ctx, const MountRequest& req) {
  if (!req.master.empty()) return "cluster " + req.master;
  if (!req.uri.empty()) return req.uri;
  return "the namespaces of " + ctx.flags().config_file;
}

// Forks a daemon that holds the mount; returns once its server serves (or failed), saying so on
// stdout.
int RunBackground(const CliContext& ctx, const MountRequest& req) {
  std::string log_file =
      ctx.flags().log_file.empty() ? DefaultMountLogFile(req.mountpoint) : ctx.flags().log_file;
  int fds[2];
  if (::pipe(fds) != 0) return ReportError(Status::IoError("pipe failed"));
  ScopedFd read_end(fds[0]), write_end(fds[1]);
  pid_t pid = ::fork();
  if (pid < 0) return ReportError(Status::IoError("fork failed"));
  if (pid > 0) {  // the caller: wait for the daemon's word
    write_end.reset();
    char code = 1;
    ssize_t n = ::read(read_end.get(), &code, 1);
    read_end.reset();
    if (n != 1) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      return WIFEXITED(status) && WEXITSTATUS(status) != 0 ? WEXITSTATUS(status) : kExitFailure;
    }
    if (code == kExitOk) {
      std::printf("mounted %s at %s (log: %s)\n", MountSource(ctx, req).c_str(),
                  NormalizedPath(req.mountpoint).c_str(), log_file.c_str());
    }
    return code;
  }
  read_end.reset();
  ::fcntl(write_end.get(), F_SETFD, FD_CLOEXEC);
  ::setsid();
  if (Status s = InitLogging(ctx.flags().log_level, log_file); !s.ok()) {
    std::fprintf(stderr, "lakecache: error: %s\n", s.message().c_str());
    ::_exit(kExitFailure);
  }
  int ready_fd = write_end.release();  // the callback closes it once it has said "ready"
  int rc = RunSupervised(ctx, req, [ready_fd] {
    char ok = kExitOk;
    (void)!::write(ready_fd, &ok, 1);
    ::close(ready_fd);
    DetachStdio();
  });
  spdlog::default_logger()->flush();
  ::_exit(rc);
}

// `lakecache mount --takeover MNT`: this binary's server takes the live mount over.
int RunTakeover(const MountRequest& req) {
  std::string mountpoint = NormalizedPath(req.mountpoint);
  if (MountTypeAt(mountpoint) != kLakecacheFsType) {
    return MountpointError(mountpoint + " is not a lakecache mount: nothing to take over");
  }
  std::string socket = req.holder.empty() ? HolderSocketPath(mountpoint) : req.holder;
  auto exe = SelfExecutable();
  if (!exe.ok()) return ReportError(exe.status());
  auto taken = RequestTakeover(socket, *exe, std::chrono::seconds(60));
  if (!taken.ok()) return ReportError(taken.status().WithContext("taking over " + mountpoint));
  std::fprintf(stderr,
               "lakecache: %s is served by pid %d (%s) now; the handover paused it %.3f s\n",
               mountpoint.c_str(), static_cast<int>(taken->pid), exe->c_str(), taken->pause_s);
  return kExitOk;
}

}  // namespace

std::string DefaultMountLogFile(const std::string& mountpoint) {
  // Named after the mountpoint for whoever reads /tmp, and told apart by a hash of it (its
  // characters beyond letters and digits all read as '-').
  std::string path = NormalizedPath(mountpoint);
  std::string name;
  for (char c : path) {
    bool plain = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_';
    if (plain) {
      name.push_back(c);
    } else if (!name.empty() && name.back() != '-') {
      name.push_back('-');
    }
  }
  if (name.size() > kLogNameMax) name.erase(0, name.size() - kLogNameMax);
  if (!name.empty() && name.back() == '-') name.pop_back();  // runs of others are one '-'
  if (!name.empty() && name.front() == '-') name.erase(0, 1);
  char hash[9];
  std::snprintf(hash, sizeof(hash), "%08x", static_cast<unsigned>(RendezvousSeed(path)));
  return "/tmp/lakecache-mount-" + std::to_string(::getuid()) + "-" +
         (name.empty() ? "" : name + "-") + hash + ".log";
}

int RunMount(const GlobalFlags& flags, const MountRequest& req) {
  auto options = ParseMountOptions(flags.overrides);
  if (!options.ok()) return ReportError(options.status());
  if (req.takeover) return RunTakeover(req);
  if (req.uri.empty() && flags.config_file.empty() && req.master.empty()) {
    return ReportError(
        Status::InvalidArgument("mount needs a URI, --config FILE, or --master HOST:PORT (or " +
                                std::string(kMasterEnv) + ")"));
  }
  GlobalFlags config_flags = flags;
  config_flags.overrides = options->config_overrides;
  CliContext ctx(config_flags);
  // A held connection is mounted already: by the process that holds it.
  if (!req.holder.empty()) return RunHeldServer(ctx, req, *options);
  if (req.fuse_fd >= 0) {
    std::unique_ptr<metrics::Registry> registry = MakeMetricsRegistry(req.metrics_listen);
    auto prepared = PrepareMount(ctx, req, registry.get());
    if (!prepared.ok()) return ReportError(prepared.status());
    auto mounted = Finish(std::move(*prepared), req, *options, nullptr, std::move(registry));
    if (!mounted.ok()) return ReportError(mounted.status());
    Status s = Serve(*mounted);
    return s.ok() ? kExitOk : ReportError(s);
  }
  // A --metrics-listen that may not be served, or is in use, fails here, before anything is
  // mounted.
  auto metrics_options =
      MetricsEndpointOptions("lakecache mount", req.metrics_listen, req.credentials, req.insecure,
                             !flags.log_file.empty());
  if (!metrics_options.ok()) return ReportError(metrics_options.status());
  if (Status s = CheckMetricsListen(*metrics_options); !s.ok()) return ReportError(s);
  if (int rc = CheckMountpoint(req.mountpoint); rc != kExitOk) return rc;
  return req.background ? RunBackground(ctx, req) : RunForeground(ctx, req);
}

int RunHolder(const HolderRequest& req) {
  MountHolderOptions holder;
  holder.socket_path = req.socket;
  holder.mount = MountHeldConnection;
  Status s = RunMountHolder(holder);
  return s.ok() ? kExitOk : ReportError(s);
}

}  // namespace lakecache::cli
