// The lakecache mounts on this host that read through a given cluster, and their unmounting, for
// `cluster down`: it unmounts them before it stops the servers, since a mount left behind answers
// every access with EIO, and only after seconds of retries. For the CLI's main thread.
#pragma once

#include <string>
#include <vector>

namespace lakecache::cli {

// The mountpoints of the lakecache mounts whose master is `master` (HOST:PORT): as their control
// socket says (Hello), or, for a mount whose socket does not answer (one started with another
// LAKECACHE_RUN_DIR, or whose server is restarting), as its source says ("lakecache:cluster:ADDR").
// A mount given several masters is one of the cluster when any of them is `master`.
std::vector<std::string> MountsOfCluster(const std::string& master);

// Unmounts each of `mountpoints` and waits until its processes have exited; one that is busy is
// detached lazily. Says on stdout what it unmounted ("unmounted /mnt/x (a mount of this
// cluster)") and on stderr what it detached and why, or could not unmount. False when one could
// not be unmounted.
bool UnmountClusterMounts(const std::vector<std::string>& mountpoints);

}  // namespace lakecache::cli
