#include "membership/leader_election.h"

#include <spdlog/spdlog.h>

namespace lakecache {

LeaderElection::LeaderElection(std::shared_ptr<EtcdClient> etcd, std::string key, std::string value,
                               std::chrono::seconds ttl, ChangeFn on_change)
    : etcd_(std::move(etcd)),
      key_(std::move(key)),
      value_(std::move(value)),
      ttl_(ttl),
      on_change_(std::move(on_change)) {
  thread_ = std::thread([this] { Run(); });
}

LeaderElection::~LeaderElection() { Stop(); }

bool LeaderElection::leading() const {
  MutexLock lock(&mu_);
  return leading_ && Clock::now() < lead_until_;
}

std::string LeaderElection::leader() const {
  MutexLock lock(&mu_);
  return leader_;
}

bool LeaderElection::WaitForLeader(std::chrono::milliseconds timeout) const {
  auto deadline = Clock::now() + timeout;
  MutexLock lock(&mu_);
  while (leader_.empty()) {
    if (Clock::now() >= deadline) return false;
    cv_.WaitUntil(&mu_, deadline);
  }
  return true;
}

void LeaderElection::Set(bool leading, const std::string& leader, int64_t created) {
  auto publish = [&]() REQUIRES(mu_) {
    leading_ = leading;
    lead_until_ = renewed_ + lease_ttl_ / 2;
    leader_ = leader;
    created_ = leading ? created : 0;
    cv_.SignalAll();
  };
  bool changed, taking;
  {
    MutexLock lock(&mu_);
    // A lapsed lead (leading() turned false on its own) counts as a change too.
    bool was_leading = leading_ && Clock::now() < lead_until_;
    changed = leading != was_leading || leader != leader_;
    taking = leading && !was_leading;
    if (!taking) publish();
  }
  if (!changed) return;
  if (leading) {
    spdlog::info("election {}: this master ({}) leads", key_, value_);
  } else if (leader.empty()) {
    spdlog::warn("election {}: no leader known", key_);
  } else {
    spdlog::info("election {}: {} leads", key_, leader);
  }
  if (on_change_) on_change_(leading, leader);
  if (taking) {
    // Published only once on_change has run: a master coming to lead first drops what another
    // leader may have made stale, and leading() stays false until it has.
    MutexLock lock(&mu_);
    publish();
  }
}

void LeaderElection::Run() {
  for (;;) {
    Round();
    std::chrono::milliseconds pace = (lease_ttl_.count() > 0 ? lease_ttl_ : ttl_);
    MutexLock lock(&mu_);
    if (stopping_) return;
    cv_.WaitUntil(&mu_, Clock::now() + pace / 4);
    if (stopping_) return;
  }
}

void LeaderElection::Round() {
  // The lease first: without a live one this candidate can neither lead nor stay leader.
  if (lease_ != 0) {
    auto asked = Clock::now();
    auto left = etcd_->KeepAlive(lease_);
    if (left.ok()) {
      renewed_ = asked;
      // The lease lives, and our key with it: the lead goes on from this renewal, however long
      // the rest of the round takes.
      MutexLock lock(&mu_);
      if (leading_) lead_until_ = renewed_ + lease_ttl_ / 2;
    } else if (left.status().code() == StatusCode::kNotFound) {
      lease_ = 0;  // expired: our key (if any) went with it
      Set(false, "", 0);
    } else {
      // etcd out of reach: leading() lapses on its own ttl/2 after the last renewal; say so once
      // it has. A follower keeps naming the last leader it knew.
      bool lapsed;
      {
        MutexLock lock(&mu_);
        lapsed = leading_ && Clock::now() >= lead_until_;
      }
      if (lapsed) {
        spdlog::warn("election {}: cannot renew the lease ({}); not leading", key_,
                     left.status().message());
        Set(false, "", 0);
      }
      return;
    }
  }
  if (lease_ == 0) {
    auto asked = Clock::now();
    auto granted = etcd_->Grant(ttl_);
    if (!granted.ok()) return;
    lease_ = granted->id;
    lease_ttl_ = granted->ttl;
    renewed_ = asked;
  }
  auto created = etcd_->CreateIfAbsent(key_, value_, lease_);
  if (!created.ok()) return;  // leading() lapses on its own if this goes on
  auto current = etcd_->Get(key_);
  if (!current.ok()) return;
  if (current->kvs.empty()) {
    Set(false, "", 0);  // gone between the two calls: the next round campaigns again
    return;
  }
  const EtcdKeyValue& kv = current->kvs.front();
  // Ours if it is under our lease (a key an earlier lease of ours made is not: it went with it).
  Set(kv.lease == lease_, kv.value, kv.create_revision);
}

void LeaderElection::Stop() {
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
  int64_t created;
  {
    MutexLock lock(&mu_);
    created = created_;
  }
  if (created != 0) {
    auto deleted = etcd_->DeleteIfCreated(key_, created);
    if (deleted.ok() && *deleted) spdlog::info("election {}: {} resigned", key_, value_);
  }
  if (lease_ != 0) (void)etcd_->Revoke(lease_);
  Set(false, "", 0);
}

}  // namespace lakecache
