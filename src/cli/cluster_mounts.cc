#include "cli/cluster_mounts.h"

#include <cstdio>
#include <sstream>

#include "cli/admin_target.h"
#include "cli/unmount.h"
#include "common/mount_table.h"

namespace lakecache::cli {
namespace {

// A mount's control socket answers at once: it asks nobody else.
constexpr auto kMountHelloTimeout = std::chrono::seconds(2);
constexpr char kClusterSource[] = "lakecache:cluster:";
constexpr char kOfThisCluster[] = "(a mount of this cluster)";

// "localhost:7400" and "127.0.0.1:7400" name one master.
std::string Canonical(std::string address) {
  if (address.starts_with("localhost:")) address.replace(0, 9, "127.0.0.1");
  return address;
}

// True when one of the comma-separated `masters` is `master`.
bool Names(const std::string& masters, const std::string& master) {
  std::istringstream in(masters);
  for (std::string one; std::getline(in, one, ',');) {
    if (Canonical(one) == Canonical(master)) return true;
  }
  return false;
}

bool OfCluster(const MountEntry& mount, const std::string& master) {
  Result<rpc::HelloResponse> hello = MountHello(mount.mountpoint, kMountHelloTimeout);
  if (hello.ok()) return Names(hello->master(), master);
  return mount.source.starts_with(kClusterSource) &&
         Names(mount.source.substr(sizeof(kClusterSource) - 1), master);
}

}  // namespace

std::vector<std::string> MountsOfCluster(const std::string& master) {
  std::vector<std::string> out;
  for (const MountEntry& m : ReadMountTable()) {
    if (m.type == kLakecacheFsType && OfCluster(m, master)) out.push_back(m.mountpoint);
  }
  return out;
}

bool UnmountClusterMounts(const std::vector<std::string>& mountpoints) {
  bool ok = true;
  for (const std::string& mnt : mountpoints) {
    MountProcesses processes = MountProcesses::Find(mnt);
    Result<Unmounted> unmounted = UnmountFuse(mnt, Detach::kIfBusy);
    if (!unmounted.ok()) {
      std::fprintf(stderr, "lakecache: error: cannot unmount %s %s: %s\n", mnt.c_str(),
                   kOfThisCluster, unmounted.status().message().c_str());
      ok = false;
      continue;
    }
    if (unmounted->lazily) {
      std::fprintf(stderr,
                   "lakecache: warning: %s %s is busy: %s; detached it lazily: it is gone from the "
                   "folder tree, and what still uses it gets errors once the cluster is down\n",
                   mnt.c_str(), kOfThisCluster, unmounted->busy.c_str());
      continue;
    }
    if (Status gone = processes.WaitForExit(); !gone.ok()) {
      std::fprintf(stderr, "lakecache: warning: %s\n", gone.message().c_str());
    }
    std::printf("unmounted %s %s\n", mnt.c_str(), kOfThisCluster);
    std::fflush(stdout);
  }
  return ok;
}

}  // namespace lakecache::cli
