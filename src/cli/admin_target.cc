#include "cli/admin_target.h"

#include <unistd.h>

#include <string>
#include <vector>

#include "cli/commands.h"
#include "common/mount_table.h"
#include "mount/mount_admin.h"
#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"

namespace lakecache::cli {
namespace {

constexpr auto kHelloTimeout = std::chrono::seconds(5);

bool Under(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path == dir ||
         (path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/');
}

// "ns/a/b" -> ns "ns", path "a/b".
void SplitNamespace(std::string rel, AdminTarget* t) {
  while (!rel.empty() && rel.front() == '/') rel.erase(0, 1);
  while (!rel.empty() && rel.back() == '/') rel.pop_back();
  size_t slash = rel.find('/');
  t->ns = rel.substr(0, slash);
  t->path = slash == std::string::npos ? "" : rel.substr(slash + 1);
}

Result<AdminTarget> MountTarget(const std::string& mountpoint, const std::string& abs) {
  AdminTarget t;
  t.kind = AdminTarget::Kind::kMount;
  t.address = "unix:" + ControlSocketPath(mountpoint);
  t.shown = mountpoint;
  LC_ASSIGN_OR_RETURN(rpc::HelloResponse hello, MountHello(mountpoint, kHelloTimeout));
  std::string rel = abs.substr(std::min(abs.size(), mountpoint == "/" ? 0 : mountpoint.size()));
  while (!rel.empty() && rel.front() == '/') rel.erase(0, 1);
  if (!hello.root_namespace().empty()) {
    SplitNamespace(hello.root_namespace() + "/" + rel, &t);
  } else {
    SplitNamespace(rel, &t);
  }
  t.mountpoint = mountpoint;
  if (!hello.master().empty()) {
    t.kind = AdminTarget::Kind::kCluster;
    t.address = hello.master();
    t.shown = hello.master();
    t.mount_credentials = hello.credentials();
  }
  return t;
}

}  // namespace

Result<rpc::HelloResponse> MountHello(const std::string& mountpoint,
                                      std::chrono::milliseconds timeout) {
  std::string socket = ControlSocketPath(mountpoint);
  auto stub = rpc::AdminService::NewStub(rpc::OpenChannel("unix:" + socket));
  grpc::ClientContext ctx;
  rpc::SetTimeout(&ctx, timeout);
  rpc::HelloResponse hello;
  grpc::Status st = stub->Hello(&ctx, rpc::HelloRequest(), &hello);
  if (!st.ok()) {
    return Status::Unavailable("cannot reach the control socket of the mount at " + mountpoint +
                               " (" + socket + "): " + st.error_message() +
                               " (is its `lakecache mount` process running, and was it started "
                               "with the same LAKECACHE_RUN_DIR / XDG_RUNTIME_DIR?)");
  }
  return hello;
}

std::string AdminTarget::Display() const {
  if (ns.empty()) return "/";
  return "/" + ns + (path.empty() ? "" : "/" + path);
}

Result<AdminTarget> ResolveAdminTarget(const std::string& path, const std::string& master) {
  if (path.find("://") != std::string::npos) {
    AdminTarget t;
    t.kind = AdminTarget::Kind::kStore;
    t.address = path;
    return t;
  }
  if (!path.empty()) {
    std::string p = NormalizedPath(path);
    std::string best;
    for (const std::string& m : LakecacheMounts()) {
      if (Under(p, m) && m.size() >= best.size()) best = m;
    }
    if (!best.empty()) return MountTarget(best, p);
  }
  if (master.empty()) {
    return Status::InvalidArgument(
        (path.empty() ? std::string("no PATH") : "'" + path + "' is not inside a lakecache mount") +
        ", and no --master (or " + kMasterEnv + ") names a cluster");
  }
  if (!path.empty() && path.front() != '/') {
    return Status::InvalidArgument("'" + path +
                                   "': a cluster path is /NAMESPACE/PATH (or give a path inside a "
                                   "lakecache mount, or an s3:// URI)");
  }
  AdminTarget t;
  t.kind = AdminTarget::Kind::kCluster;
  t.address = master;
  t.shown = master;
  SplitNamespace(path, &t);
  return t;
}

}  // namespace lakecache::cli
