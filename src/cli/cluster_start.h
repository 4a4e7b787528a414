// ClusterStart: the servers `lakecache cluster up` starts (cluster_launcher.h starts each), what
// it waits for while they come up (each address file, the master listing every worker), and how
// a failed start is reported and undone. For the CLI's main thread only.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "cli/cluster_launcher.h"
#include "common/result.h"
#include "common/scoped_fd.h"
#include "common/status.h"

namespace lakecache::cli {

inline constexpr char kMaster[] = "master";

// From here on SIGINT, SIGTERM and SIGHUP interrupt a start (it stops what it started) instead of
// ending the process.
void CatchInterrupts();

// The bound HOST:PORT a server wrote to `path`; "" until it is there.
std::string ReadAddress(const std::string& path);

// Stops the workers, then the master (so workers do not log a vanished master).
std::vector<StopOutcome> StopCluster(const std::string& dir,
                                     const std::vector<ClusterProcess>& processes,
                                     std::chrono::seconds grace);
// Removes the pids file and the address files of `processes`.
void ForgetCluster(const std::string& dir, const std::vector<ClusterProcess>& processes);

// A cluster being started: what runs so far, and why the start failed.
class ClusterStart {
 public:
  using Clock = std::chrono::steady_clock;

  ClusterStart(std::string dir, std::string exe, std::vector<std::string> server_flags);
  ~ClusterStart();
  ClusterStart(const ClusterStart&) = delete;
  ClusterStart& operator=(const ClusterStart&) = delete;

  // Starts `name` with `role_args` (the subcommand and its flags) and records its pid.
  Status Start(const std::string& name, const std::vector<std::string>& role_args);
  // Waits up to `timeout` for `name`'s address file; the address.
  Result<std::string> WaitForAddress(const std::string& name, std::chrono::seconds timeout);
  // Waits up to `timeout` until every worker wrote its address and the master lists them all.
  Status WaitForWorkers(const std::string& master_address, const std::string& credentials,
                        std::chrono::seconds timeout);
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
    ScopedFd exited;  // a pidfd: readable once the process has exited
  };

  // kUnavailable naming the process when one has exited; also on SIGINT/SIGTERM.
  Status CheckRunning();
  Status Timeout(const std::string& blame, const std::string& message);
  // Waits until an address file is written in the folder, a server exits, `up` is interrupted or
  // `deadline` passes, whichever comes first.
  void WaitForEvent(Clock::time_point deadline);

  std::string dir_;
  std::string exe_;
  std::vector<std::string> server_flags_;
  std::vector<Started> started_;  // the master first
  std::string blame_;             // whose log explains the failure; "" for none
  ScopedFd dir_events_;           // inotify on dir_: files written there
};

}  // namespace lakecache::cli
