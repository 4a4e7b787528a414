// `lakecache health`: whether the local daemon serves, for a Kubernetes exec probe (kubelet's own
// gRPC and HTTP probes can present neither TLS nor a token). It asks the daemon's health socket
// (a master's or worker's --health-socket, or a mount's control socket), never a TCP port.
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "common/mount_table.h"
#include "common/units.h"
#include "mount/mount_admin.h"
#include "rpc/health.h"

namespace lakecache::cli {
namespace {

int Unhealthy(const std::string& why) {
  std::fprintf(stderr, "lakecache: unhealthy: %s\n", why.c_str());
  return kExitFailure;
}

// statfs(2) of the mountpoint (always a round trip to the FUSE process, where a stat may be
// answered from the kernel's cached attributes), given up after `timeout`: a FUSE process that is
// alive but stuck must not hang the probe. The thread is left behind on a timeout; the process
// exits soon after.
Status StatWithin(const std::string& path, std::chrono::milliseconds timeout) {
  auto done = std::make_shared<std::promise<int>>();
  std::future<int> result = done->get_future();
  std::thread([path, done] {
    struct statvfs st;
    done->set_value(::statvfs(path.c_str(), &st) == 0 ? 0 : errno);
  }).detach();
  if (result.wait_for(timeout) != std::future_status::ready) {
    return Status::Unavailable("the mount at " + path + " does not answer a statfs within " +
                               std::to_string(timeout.count()) + " ms");
  }
  int err = result.get();
  if (err == ENOTCONN) {
    return Status::Unavailable("the mount at " + path +
                               " is dead (its FUSE process is gone); clear it with "
                               "`fusermount3 -u " +
                               path + "`");
  }
  if (err != 0) return Status::Unavailable("cannot stat " + path + ": " + std::strerror(err));
  return Status::Ok();
}

}  // namespace

int RunHealth(const HealthRequest& req) {
  if (req.mountpoint.empty() == req.socket.empty()) {
    return ReportError(Status::InvalidArgument(
        "lakecache health needs a MOUNTPOINT (a mount) or --socket PATH (a master's or worker's "
        "--health-socket), not both"));
  }
  Result<Duration> wait = ParseDuration(req.timeout);
  if (!wait.ok()) return ReportError(wait.status().WithContext("--timeout"));
  auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*wait);
  std::string socket = req.socket;
  if (!req.mountpoint.empty()) {
    std::string mountpoint = NormalizedPath(req.mountpoint);
    // Where the mount is visible, it must answer a statfs. A server whose mount is its holder's
    // (a Kubernetes FUSE pod, which does not map the folder) is asked on its control socket.
    if (MountTypeAt(mountpoint) == kLakecacheFsType || ::access(mountpoint.c_str(), F_OK) == 0) {
      if (Status s = StatWithin(mountpoint, timeout); !s.ok()) return Unhealthy(s.message());
    }
    socket = ControlSocketPath(mountpoint);
  }
  Result<rpc::HealthState> state = rpc::CheckHealth(socket, timeout);
  if (!state.ok()) {
    std::string what = req.mountpoint.empty() ? state.status().message()
                                              : "no lakecache mount answers for " + req.mountpoint +
                                                    " (" + state.status().message() + ")";
    return Unhealthy(what);
  }
  // Alive is enough for a liveness probe: a worker whose master is away must not be restarted.
  if (!state->serving && !req.live) return Unhealthy(state->detail);
  std::printf("%s: %s\n", state->serving ? "healthy" : "alive", state->detail.c_str());
  return kExitOk;
}

}  // namespace lakecache::cli
