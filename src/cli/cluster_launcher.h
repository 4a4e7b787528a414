// The processes of a local cluster (`lakecache cluster up` / `cluster down`): starting a server as
// a detached child, the DIR/cluster.pids record, and recognising and stopping a recorded process.
//
// A started server runs in its own session, reads /dev/null, appends stdout and stderr to its log
// and inherits no other descriptor, so it outlives the launcher and never holds the caller's
// pipes. Every function is for the CLI's main thread only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/status.h"

namespace lakecache::cli {

// One server of the cluster: "master" or "worker-K", and its pid.
struct ClusterProcess {
  std::string name;
  pid_t pid = 0;
};

// The files of process `name` in the cluster folder `dir`.
std::string AddressFilePath(const std::string& dir, const std::string& name);
std::string LogFilePath(const std::string& dir, const std::string& name);
std::string PidsFilePath(const std::string& dir);

// Reads DIR/cluster.pids ("NAME PID" lines). kNotFound when there is none.
Result<std::vector<ClusterProcess>> ReadPidsFile(const std::string& dir);
// Replaces DIR/cluster.pids atomically (write, then rename), so a reader never sees half of it.
Status WritePidsFile(const std::string& dir, const std::vector<ClusterProcess>& processes);

// The absolute path of the running binary; resolve it before forking.
Result<std::string> SelfExecutable();

// Forks and execs `argv` (argv[0] is the program's path, nothing is looked up in PATH) as a
// detached server whose output is appended to `log_path`. Returns its pid.
Result<pid_t> SpawnDetached(const std::vector<std::string>& argv, const std::string& log_path);

// True while `process` is the server `cluster up` started in `dir`: its command line carries
// `--address-file DIR/NAME.addr`. A recycled pid, a zombie or a vanished process is not. A child of
// this process that has exited is reaped here.
bool IsRunning(const std::string& dir, const ClusterProcess& process);

enum class StopOutcome {
  kNotRunning,  // was gone already
  kStopped,     // exited after SIGTERM
  kKilled,      // needed SIGKILL
  kFailed,      // could not be signalled, or survived SIGKILL
};

// Sends SIGTERM to each process that IsRunning, waits up to `grace` for them all to exit, then
// sends SIGKILL to what is left. Returns one outcome per process, in order.
std::vector<StopOutcome> StopProcesses(const std::string& dir,
                                       const std::vector<ClusterProcess>& processes,
                                       std::chrono::seconds grace);

// The last `max_lines` lines the file gained after byte `from` (e.g. where a run's log began).
std::string LogTail(const std::string& path, off_t from, int max_lines = 20);

}  // namespace lakecache::cli
