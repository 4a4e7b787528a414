// LeaderElection: one leader among the masters of a cluster, chosen through etcd.
//
// Each candidate holds a lease of `ttl` (or the longer one etcd grants) it keeps alive every
// ttl/4, and tries, in a transaction, to create the election key under it with its own address:
// the one that creates the key leads until its lease ends. The others read the key every ttl/4 to
// know who leads, and try again once it is gone. So a leader that dies or is cut off from etcd
// loses the key within one ttl of its last renewal, and another candidate leads within ttl + ttl/4
// of that.
//
// A leader stops leading on its own ttl/2 after the last renewal it knows of (the time it asked,
// not the time the answer came), whatever its thread is waiting on: etcd's lease outlives that by
// ttl/2, so two masters never both believe they lead unless a clock runs that much fast. Stop()
// resigns at once (deletes the key if it is ours and revokes the lease), so a restart or shutdown
// hands leadership over without waiting for a ttl. Its etcd client's call timeout should be at
// most ttl/4. Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "membership/etcd_client.h"

namespace lakecache {

class LeaderElection {
 public:
  // `on_change(leading, leader)` runs on the election's thread whenever who leads changes
  // (leader: the leader's value, empty while nobody is known to lead); it must not call Stop.
  using ChangeFn = std::function<void(bool leading, const std::string& leader)>;
  LeaderElection(std::shared_ptr<EtcdClient> etcd, std::string key, std::string value,
                 std::chrono::seconds ttl, ChangeFn on_change = nullptr);
  ~LeaderElection();  // Stop()
  LeaderElection(const LeaderElection&) = delete;
  LeaderElection& operator=(const LeaderElection&) = delete;

  // True while this candidate holds the key and its lease was renewed within ttl/2.
  bool leading() const EXCLUDES(mu_);
  // The leader's value (its address); empty while unknown.
  std::string leader() const EXCLUDES(mu_);
  // Waits until someone leads (true) or `timeout` passes.
  bool WaitForLeader(std::chrono::milliseconds timeout) const EXCLUDES(mu_);

  // Resigns and stops campaigning. Idempotent.
  void Stop() EXCLUDES(mu_);

 private:
  using Clock = std::chrono::steady_clock;
  void Run();
  // One round: renews (or takes) the lease, then campaigns or reads the key.
  void Round();
  void Set(bool leading, const std::string& leader, int64_t created) EXCLUDES(mu_);

  const std::shared_ptr<EtcdClient> etcd_;
  const std::string key_;
  const std::string value_;
  const std::chrono::seconds ttl_;
  const ChangeFn on_change_;
  // The election thread's alone.
  int64_t lease_ = 0;
  std::chrono::seconds lease_ttl_{0};  // as granted
  Clock::time_point renewed_{};        // when the lease's last renewal (or grant) was asked for

  mutable Mutex mu_;
  mutable CondVar cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  bool leading_ GUARDED_BY(mu_) = false;
  Clock::time_point lead_until_ GUARDED_BY(mu_){};  // renewed_ + lease ttl / 2 while leading
  std::string leader_ GUARDED_BY(mu_);
  int64_t created_ GUARDED_BY(mu_) = 0;  // our key's create revision while leading
  std::thread thread_;
};

}  // namespace lakecache
