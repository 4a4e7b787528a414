#include "membership/etcd_membership.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/units.h"

namespace lakecache {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kUsedBytesPace = std::chrono::seconds(10);

// What placement depends on changed (or the worker restarted): written at once.
bool PlacementChanged(const rpc::WorkerInfo& a, const rpc::WorkerInfo& b) {
  return a.address() != b.address() || a.capacity_bytes() != b.capacity_bytes() ||
         a.start_time_ms() != b.start_time_ms() || a.data_address() != b.data_address() ||
         a.node_socket() != b.node_socket() || a.host_id() != b.host_id() ||
         a.insecure() != b.insecure();
}

}  // namespace

Result<std::unique_ptr<EtcdMembership>> EtcdMembership::Start(std::shared_ptr<EtcdClient> etcd,
                                                              std::string prefix,
                                                              std::chrono::seconds ttl,
                                                              ChangeFn on_change) {
  std::unique_ptr<EtcdMembership> m(
      new EtcdMembership(std::move(etcd), std::move(prefix), ttl, std::move(on_change)));
  auto listed = m->etcd_->GetPrefix(m->prefix_);
  if (!listed.ok()) return listed.status();
  {
    MutexLock lock(&m->mu_);
    for (const auto& kv : listed->kvs) m->Upsert(kv);
    m->epoch_ = static_cast<uint64_t>(listed->revision);
  }
  m->Notify();
  EtcdMembership* self = m.get();
  m->watch_ = std::make_unique<EtcdWatch>(
      m->etcd_, m->prefix_, listed->revision,
      [self](const EtcdWatchUpdate& update) {
        self->Apply(update);
        self->Notify();
      },
      [self](bool connected, const Status&) {
        MutexLock lock(&self->mu_);
        self->stale_ = !connected;
      });
  return m;
}

EtcdMembership::~EtcdMembership() { watch_.reset(); }

void EtcdMembership::Notify() {
  if (!on_change_) return;
  MutexLock order(&notify_mu_);
  uint64_t epoch = 0;
  std::vector<rpc::WorkerInfo> workers = Workers(&epoch);
  on_change_(workers, epoch);
}

void EtcdMembership::Upsert(const EtcdKeyValue& kv) {
  rpc::WorkerInfo info;
  if (!info.ParseFromString(kv.value) || info.id().empty()) {
    spdlog::warn("etcd key {} is not a worker's record; ignored", kv.key);
    return;
  }
  auto [it, joined] = workers_.try_emplace(info.id());
  if (joined) {
    spdlog::info("worker {} joined the cluster at {} (capacity {})", info.id(), info.address(),
                 FormatByteSize(info.capacity_bytes()));
  } else if (PlacementChanged(it->second.info, info)) {
    spdlog::info("worker {} changed (address {}, capacity {})", info.id(), info.address(),
                 FormatByteSize(info.capacity_bytes()));
  }
  it->second.info = std::move(info);
  it->second.lease = kv.lease;
}

void EtcdMembership::Apply(const EtcdWatchUpdate& update) {
  MutexLock lock(&mu_);
  if (update.snapshot) {
    std::map<std::string, Entry> before;
    before.swap(workers_);
    for (const auto& kv : update.kvs) Upsert(kv);
    for (const auto& [id, entry] : before)
      if (!workers_.count(id)) spdlog::info("worker {} left the cluster", id);
  }
  for (const auto& event : update.events) {
    if (!event.deleted) {
      Upsert(event.kv);
      continue;
    }
    std::string id = event.kv.key.substr(prefix_.size());
    if (workers_.erase(id))
      spdlog::info("worker {} left the cluster: its lease ended (no heartbeat for {} s)", id,
                   ttl_.count());
  }
  epoch_ = std::max(epoch_, static_cast<uint64_t>(update.revision));
  stale_ = false;
}

Result<uint64_t> EtcdMembership::Write(const rpc::WorkerInfo& worker, int64_t lease) {
  auto revision = etcd_->Put(prefix_ + worker.id(), worker.SerializeAsString(), lease);
  if (!revision.ok()) return revision.status();
  MutexLock lock(&mu_);
  // The watch brings the same change; apply it now so the caller's next read sees it.
  EtcdKeyValue kv{prefix_ + worker.id(), worker.SerializeAsString(), 0, *revision, lease};
  Upsert(kv);
  workers_[worker.id()].written = Clock::now();
  if (static_cast<uint64_t>(*revision) > epoch_) epoch_ = static_cast<uint64_t>(*revision);
  return epoch_;
}

Result<uint64_t> EtcdMembership::Register(const rpc::WorkerInfo& worker) {
  int64_t old_lease = 0;
  std::vector<std::string> reused;  // other ids at this address: gone
  {
    MutexLock lock(&mu_);
    if (auto it = workers_.find(worker.id()); it != workers_.end()) old_lease = it->second.lease;
    for (const auto& [id, entry] : workers_)
      if (id != worker.id() && entry.info.address() == worker.address()) reused.push_back(id);
  }
  auto lease = etcd_->Grant(ttl_);
  if (!lease.ok()) return lease.status();
  auto epoch = Write(worker, lease->id);
  if (!epoch.ok()) {
    (void)etcd_->Revoke(lease->id);
    return epoch.status();
  }
  Notify();
  if (old_lease != 0) (void)etcd_->Revoke(old_lease);  // its key is ours now, under the new one
  for (const auto& id : reused) {
    spdlog::info("worker {} left the cluster: worker {} now serves on {}", id, worker.id(),
                 worker.address());
    (void)etcd_->Delete(prefix_ + id);
  }
  return epoch;
}

Result<std::optional<uint64_t>> EtcdMembership::Heartbeat(const rpc::WorkerInfo& worker) {
  rpc::WorkerInfo merged;
  int64_t lease = 0;
  bool write = false;
  {
    MutexLock lock(&mu_);
    auto it = workers_.find(worker.id());
    if (it == workers_.end()) return std::optional<uint64_t>();
    const Entry& entry = it->second;
    lease = entry.lease;
    // Fields a heartbeat leaves unset keep their registered values.
    merged = entry.info;
    merged.set_used_bytes(worker.used_bytes());
    if (worker.capacity_bytes() != 0) merged.set_capacity_bytes(worker.capacity_bytes());
    if (!worker.address().empty()) merged.set_address(worker.address());
    if (worker.start_time_ms() != 0) merged.set_start_time_ms(worker.start_time_ms());
    merged.set_insecure(worker.insecure());
    write =
        PlacementChanged(entry.info, merged) || (merged.used_bytes() != entry.info.used_bytes() &&
                                                 Clock::now() - entry.written >= kUsedBytesPace);
  }
  auto left = etcd_->KeepAlive(lease);
  if (!left.ok()) {
    if (left.status().code() == StatusCode::kNotFound) return std::optional<uint64_t>();
    return left.status();
  }
  if (write) {
    auto epoch = Write(merged, lease);
    if (!epoch.ok()) return epoch.status();
    Notify();
    return std::optional<uint64_t>(*epoch);
  }
  MutexLock lock(&mu_);
  return std::optional<uint64_t>(epoch_);
}

std::vector<rpc::WorkerInfo> EtcdMembership::Workers(uint64_t* epoch) const {
  MutexLock lock(&mu_);
  std::vector<rpc::WorkerInfo> out;
  for (const auto& [id, entry] : workers_) out.push_back(entry.info);
  if (epoch != nullptr) *epoch = epoch_;
  return out;
}

bool EtcdMembership::stale() const {
  MutexLock lock(&mu_);
  return stale_;
}

}  // namespace lakecache
