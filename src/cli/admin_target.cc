#include "cli/admin_target.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "cli/commands.h"
#include "client/mount_admin.h"
#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"

namespace lakecache::cli {
namespace {

namespace fs = std::filesystem;

constexpr auto kHelloTimeout = std::chrono::seconds(5);

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    bool octal = field[i] == '\\' && i + 3 < field.size();
    for (size_t k = 1; octal && k <= 3; ++k) octal = field[i + k] >= '0' && field[i + k] <= '7';
    if (octal) {
      out.push_back(static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                                      (field[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(field[i]);
    }
  }
  return out;
}

// The mountpoints of lakecache file systems (type fuse.lakecache) this process can see.
std::vector<std::string> LakecacheMounts() {
  std::vector<std::string> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    size_t dash = 0;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (f.size() < 5 || dash + 1 >= f.size()) continue;
    if (f[dash + 1] == "fuse.lakecache") out.push_back(Unescape(f[4]));
  }
  return out;
}

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
  std::string socket = ControlSocketPath(mountpoint);
  t.address = "unix:" + socket;
  t.shown = mountpoint;
  auto stub = rpc::AdminService::NewStub(rpc::OpenChannel(t.address));
  grpc::ClientContext ctx;
  rpc::SetTimeout(&ctx, kHelloTimeout);
  rpc::HelloResponse hello;
  grpc::Status st = stub->Hello(&ctx, rpc::HelloRequest(), &hello);
  if (!st.ok()) {
    return Status::Unavailable("cannot reach the control socket of the mount at " + mountpoint +
                               " (" + socket + "): " + st.error_message() +
                               " (is its `lakecache mount` process running, and was it started "
                               "with the same LAKECACHE_RUN_DIR / XDG_RUNTIME_DIR?)");
  }
  std::string rel = abs.substr(std::min(abs.size(), mountpoint == "/" ? 0 : mountpoint.size()));
  while (!rel.empty() && rel.front() == '/') rel.erase(0, 1);
  if (!hello.root_namespace().empty()) {
    SplitNamespace(hello.root_namespace() + "/" + rel, &t);
  } else {
    SplitNamespace(rel, &t);
  }
  if (!hello.master().empty()) {
    t.kind = AdminTarget::Kind::kCluster;
    t.address = hello.master();
    t.shown = hello.master();
  }
  return t;
}

}  // namespace

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
    std::error_code ec;
    fs::path abs = fs::absolute(path, ec);
    if (!ec) {
      fs::path canonical = fs::weakly_canonical(abs, ec);
      std::string p = (ec ? abs.lexically_normal() : canonical).string();
      while (p.size() > 1 && p.back() == '/') p.pop_back();
      std::string best;
      for (const std::string& m : LakecacheMounts()) {
        if (Under(p, m) && m.size() >= best.size()) best = m;
      }
      if (!best.empty()) return MountTarget(best, p);
    }
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
