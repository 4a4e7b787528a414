// `lakecache umount MOUNTPOINT`: unmounts a lakecache mount and returns once the processes that
// served it have exited, so that a `mount` of the same folder right after finds none of them.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/unmount.h"
#include "common/mount_table.h"

namespace lakecache::cli {

int RunUmount(const std::string& mountpoint) {
  std::string path = NormalizedPath(mountpoint);
  std::string type = MountTypeAt(path);
  if (type != kLakecacheFsType) {
    return ReportError(Status::InvalidArgument(
        mountpoint + " is not a lakecache mount (" +
        (type.empty() ? "nothing is mounted there" : "a " + type + " mount") + ")"));
  }
  // Found while mounted: once it is gone, so are their sockets.
  MountProcesses processes = MountProcesses::Find(path);
  Result<Unmounted> unmounted = UnmountFuse(mountpoint, Detach::kNever);
  if (!unmounted.ok()) return ReportError(unmounted.status());
  Status gone = processes.WaitForExit();
  return gone.ok() ? kExitOk : ReportError(gone);
}

}  // namespace lakecache::cli
