// OwnerFailover: how every call of a cluster mount to the workers that own a block or an object
// fails over, written once for reads, write proxying and anything after them. The workers are
// tried in rendezvous order of the key, those marked down last (tried only when every other one
// failed too), until one answers or fails with an answer about the request itself (not a failed
// peer: the object store's answer is the same everywhere). A worker that fails is marked down. A
// caller's deadline bounds the whole call, failovers included. No allocation per attempt (the
// order is one per call), and the messages are built only on failure. Thread-safe.
#pragma once

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "cluster_client/cluster_view.h"
#include "cluster_client/live_view.h"
#include "common/result.h"
#include "common/units.h"
#include "ufs/object_store.h"

namespace lakecache {

// What a failover does, for its messages: "no workers ... to <verb> <what>", "every worker failed
// <gerund> <what>".
struct OwnerCall {
  const char* verb;    // "read"
  const char* gerund;  // "reading"
};

class OwnerFailover {
 public:
  // `master` names the master in messages; `worker_calls` counts every attempt. `live` and
  // `worker_calls` must outlive this.
  OwnerFailover(const LiveView& live, std::string master, std::atomic<uint64_t>& worker_calls)
      : live_(live), master_(std::move(master)), worker_calls_(worker_calls) {}

  // Runs `attempt(const ViewWorker&) -> Status` on the workers of `view` in rendezvous order of
  // `key_hash` as the header says. `describe() -> std::string` names the object of the call.
  template <typename Describe, typename Attempt>
  Status Run(const ClientView& view, uint64_t key_hash, OwnerCall call, const Describe& describe,
             Clock::time_point deadline, const Attempt& attempt) const {
    if (view.workers.empty()) return NoWorkers(call, describe());
    std::vector<size_t> order = RendezvousOrder(key_hash, view.nodes);
    int64_t now = SteadyNowMs();
    std::stable_partition(order.begin(), order.end(),
                          [&](size_t i) { return view.workers[i].peer->up(now); });
    Status last;
    for (size_t i : order) {
      const ViewWorker& worker = view.workers[i];
      if (!last.ok() && Clock::now() >= deadline) return DeadlinePassed(call, describe(), last);
      worker_calls_.fetch_add(1, std::memory_order_relaxed);
      Status s = attempt(worker);
      if (s.ok() || !s.peer_failed()) return s;
      if (worker.peer->up(SteadyNowMs())) Failed(worker, call, describe(), s);
      live_.MarkDown(*worker.peer);
      last = std::move(s);
    }
    return EveryWorkerFailed(call, describe(), last);
  }

 private:
  Status NoWorkers(OwnerCall call, const std::string& what) const;
  static Status DeadlinePassed(OwnerCall call, const std::string& what, const Status& last);
  static Status EveryWorkerFailed(OwnerCall call, const std::string& what, const Status& last);
  static void Failed(const ViewWorker& worker, OwnerCall call, const std::string& what,
                     const Status& s);

  const LiveView& live_;
  const std::string master_;
  std::atomic<uint64_t>& worker_calls_;
};

}  // namespace lakecache
