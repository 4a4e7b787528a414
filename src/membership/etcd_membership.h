// EtcdMembership: the cluster's workers kept in etcd by the masters, so every master has the same
// view and a new leader starts with it.
//
// Each worker is a key `<prefix><id>` holding its WorkerInfo (protobuf bytes) under a lease of its
// own (the heartbeat timeout, or the longer one etcd grants). A worker registers and heartbeats
// through any master, as before; that master writes the key and renews the worker's lease (the
// lease id is in the key, so any master can). A worker that stops heartbeating loses its key when
// the lease runs out, and every master's view loses it. Workers never talk to etcd: they hold no
// etcd credentials, so one cannot write another's key.
//
// The view is watched, not polled: a full listing at start, then the watch's events, with etcd's
// revision of the last change as the view's epoch. A broken watch resumes where it stopped (on
// another member if need be) and lists again after a compaction; while etcd is out of reach the
// last view stays, marked stale, and registrations and heartbeats fail with a precise error.
// Used bytes (which placement ignores) are written at most every 10 s per worker. Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/mutex.h"
#include "common/result.h"
#include "membership/etcd_client.h"
#include "rpc/lakecache.pb.h"

namespace lakecache {

class EtcdMembership {
 public:
  // Called with the whole view whenever it changes (on the watch's thread or a caller's; never
  // under the membership's lock, never two at once).
  using ChangeFn = std::function<void(const std::vector<rpc::WorkerInfo>& workers, uint64_t epoch)>;
  // Lists the workers under `prefix` and starts watching it. `ttl`: the workers' leases.
  // `on_change` is called once with the listing before Start returns.
  static Result<std::unique_ptr<EtcdMembership>> Start(std::shared_ptr<EtcdClient> etcd,
                                                       std::string prefix, std::chrono::seconds ttl,
                                                       ChangeFn on_change = nullptr);
  ~EtcdMembership();
  EtcdMembership(const EtcdMembership&) = delete;
  EtcdMembership& operator=(const EtcdMembership&) = delete;

  // Writes the worker under a new lease (its earlier key and lease, if any, go), and drops
  // another id that announced the same address. Returns the epoch afterwards.
  Result<uint64_t> Register(const rpc::WorkerInfo& worker) EXCLUDES(mu_);
  // Renews the worker's lease and writes what changed. nullopt when etcd does not know the
  // worker (its lease ran out, or it never registered): it must register again.
  Result<std::optional<uint64_t>> Heartbeat(const rpc::WorkerInfo& worker) EXCLUDES(mu_);

  // The workers etcd holds (as of the watch), sorted by id, with the epoch; see stale().
  std::vector<rpc::WorkerInfo> Workers(uint64_t* epoch) const EXCLUDES(mu_);
  // True while the watch is broken: the view is the last one seen.
  bool stale() const EXCLUDES(mu_);

 private:
  struct Entry {
    rpc::WorkerInfo info;
    int64_t lease = 0;
    std::chrono::steady_clock::time_point written{};  // by this master; for used bytes' pace
  };
  EtcdMembership(std::shared_ptr<EtcdClient> etcd, std::string prefix, std::chrono::seconds ttl,
                 ChangeFn on_change)
      : etcd_(std::move(etcd)),
        prefix_(std::move(prefix)),
        ttl_(ttl),
        on_change_(std::move(on_change)) {}
  // Hands the current view to on_change_.
  void Notify() EXCLUDES(mu_, notify_mu_);
  void Apply(const EtcdWatchUpdate& update) EXCLUDES(mu_);
  // Sets a key's entry from etcd's value (a key that does not parse is logged and skipped).
  void Upsert(const EtcdKeyValue& kv) REQUIRES(mu_);
  Result<uint64_t> Write(const rpc::WorkerInfo& worker, int64_t lease) EXCLUDES(mu_);

  const std::shared_ptr<EtcdClient> etcd_;
  const std::string prefix_;
  const std::chrono::seconds ttl_;
  const ChangeFn on_change_;
  Mutex notify_mu_;  // one Notify at a time, in order; taken before mu_
  mutable Mutex mu_;
  std::map<std::string, Entry> workers_ GUARDED_BY(mu_);  // by id
  uint64_t epoch_ GUARDED_BY(mu_) = 0;
  bool stale_ GUARDED_BY(mu_) = false;
  std::unique_ptr<EtcdWatch> watch_;  // last: stopped first
};

}  // namespace lakecache
