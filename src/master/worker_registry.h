// WorkerRegistry: the workers the master believes alive, and the epoch of that view.
//
// A worker joins with Register and stays by calling Heartbeat; one not heard from for longer than
// the heartbeat timeout is dropped (checked on every call, so the answer does not depend on when a
// view was last read). The epoch changes whenever something placement depends on changes:
// membership, an address, a capacity or a restart (start_time); used bytes do not count. It starts
// at the registry's creation time in Unix ms, so a restarted master does not hand out an epoch an
// old view already had. Thread-safe: one mutex guards everything.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/units.h"
#include "rpc/lakecache.pb.h"

namespace lakecache {

class WorkerRegistry {
 public:
  using Clock = std::chrono::steady_clock;

  // REQUIRES: 0 < heartbeat_interval < heartbeat_timeout.
  WorkerRegistry(
      Duration heartbeat_interval, Duration heartbeat_timeout,
      std::function<Clock::time_point()> now = [] { return Clock::now(); });

  // Adds the worker, or replaces the entry with its id. Another entry with the same address is
  // removed: that worker is gone and its address was reused. Returns the epoch afterwards.
  // REQUIRES: worker.id() and worker.address() non-empty.
  uint64_t Register(const rpc::WorkerInfo& worker);

  // Marks the worker alive and takes its used bytes and `insecure`, and its capacity, address and
  // start time where set (non-zero, non-empty). nullopt when its id is not registered (the master
  // restarted, or the worker was dropped): it must Register again.
  std::optional<uint64_t> Heartbeat(const rpc::WorkerInfo& worker);

  // The live workers sorted by id, the epoch and the heartbeat settings.
  rpc::ClusterView View();

  // Membership kept elsewhere (etcd, membership/etcd_membership.h): from now on the set of workers
  // and the epoch are what Replace gives; nothing expires here and Register/Heartbeat are not used.
  void Replace(const std::vector<rpc::WorkerInfo>& workers, uint64_t epoch);

  // Drops (and logs) the workers silent for longer than the timeout, as every call does first; the
  // master also calls it on a timer, so a worker's departure shows in its log when it happens, not
  // at the next call.
  void Expire();

  Duration heartbeat_interval() const { return interval_; }
  Duration heartbeat_timeout() const { return timeout_; }

 private:
  struct Entry {
    rpc::WorkerInfo info;
    Clock::time_point last_seen;
  };

  // Drops workers silent for longer than the timeout.
  void ExpireLocked(Clock::time_point now) REQUIRES(mu_);
  // Stores `worker` under its id and bumps the epoch if placement changes.
  void UpsertLocked(const rpc::WorkerInfo& worker, Clock::time_point now) REQUIRES(mu_);
  // Removes entries of other ids at `worker`'s address.
  void DropAddressReuseLocked(const rpc::WorkerInfo& worker) REQUIRES(mu_);

  const Duration interval_;
  const Duration timeout_;
  const std::function<Clock::time_point()> now_;
  Mutex mu_;
  std::map<std::string, Entry> workers_ GUARDED_BY(mu_);  // by id, so views come out sorted
  uint64_t epoch_ GUARDED_BY(mu_);
  bool external_ GUARDED_BY(mu_) = false;  // set by Replace
};

}  // namespace lakecache
