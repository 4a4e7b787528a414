// WorkerProber: finds the workers that went silent while reads wait on them. A silent worker
// (stopped, hung, cut off) gives TCP no sign, so a read over the bulk path would wait out its
// deadline: a worker a read has waited on longer than probe_after is pinged on a connection of its
// own; one that does not answer within probe_timeout is marked down and the reads in flight on it
// fail over at once. A worker that answers is only slow, and is pinged again no sooner than
// probe_after. Called from one thread (ClusterClient's watcher).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "cluster_client/client_options.h"
#include "cluster_client/cluster_view.h"
#include "cluster_client/live_view.h"

namespace lakecache {

class WorkerProber {
 public:
  // `live` and `silent_workers` (counts each worker found silent) must outlive the prober.
  WorkerProber(const LiveView& live, const ClusterClientOptions& options,
               std::atomic<uint64_t>& silent_workers)
      : live_(live), options_(options), silent_workers_(silent_workers) {}

  // How often ProbeWaited should run.
  std::chrono::milliseconds tick() const {
    return std::max(std::chrono::milliseconds(50), options_.probe_after / 4);
  }
  // Probes the workers of `view` that reads waited on too long, as the header says.
  void ProbeWaited(const ClientView& view);

 private:
  const LiveView& live_;
  const ClusterClientOptions& options_;
  std::atomic<uint64_t>& silent_workers_;
};

}  // namespace lakecache
