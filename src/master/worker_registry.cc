#include "master/worker_registry.h"

#include <spdlog/spdlog.h>

namespace lakecache {
namespace {

// What changed of what block placement depends on ("" for nothing): address, capacity and the
// incarnation. Used bytes change all the time and do not move blocks.
std::string PlacementChange(const rpc::WorkerInfo& from, const rpc::WorkerInfo& to) {
  std::string change;
  auto add = [&change](const std::string& part) { change += (change.empty() ? "" : ", ") + part; };
  if (from.address() != to.address()) add("address " + from.address() + " -> " + to.address());
  if (from.capacity_bytes() != to.capacity_bytes()) {
    add("capacity " + FormatByteSize(from.capacity_bytes()) + " -> " +
        FormatByteSize(to.capacity_bytes()));
  }
  if (from.start_time_ms() != to.start_time_ms()) add("restarted");
  return change;
}

uint64_t UnixMillisNow() {
  auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
  return std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count();
}

}  // namespace

WorkerRegistry::WorkerRegistry(Duration heartbeat_interval, Duration heartbeat_timeout,
                               std::function<Clock::time_point()> now)
    : interval_(heartbeat_interval),
      timeout_(heartbeat_timeout),
      now_(std::move(now)),
      epoch_(UnixMillisNow()) {}

uint64_t WorkerRegistry::Register(const rpc::WorkerInfo& worker) {
  MutexLock lock(&mu_);
  Clock::time_point now = now_();
  ExpireLocked(now);
  DropAddressReuseLocked(worker);
  UpsertLocked(worker, now);
  return epoch_;
}

std::optional<uint64_t> WorkerRegistry::Heartbeat(const rpc::WorkerInfo& worker) {
  MutexLock lock(&mu_);
  Clock::time_point now = now_();
  ExpireLocked(now);
  auto it = workers_.find(worker.id());
  if (it == workers_.end()) return std::nullopt;
  // Fields a heartbeat leaves unset keep their registered values.
  rpc::WorkerInfo merged = it->second.info;
  merged.set_used_bytes(worker.used_bytes());
  if (worker.capacity_bytes() != 0) merged.set_capacity_bytes(worker.capacity_bytes());
  if (!worker.address().empty()) merged.set_address(worker.address());
  if (worker.start_time_ms() != 0) merged.set_start_time_ms(worker.start_time_ms());
  merged.set_insecure(worker.insecure());
  DropAddressReuseLocked(merged);
  UpsertLocked(merged, now);
  return epoch_;
}

rpc::ClusterView WorkerRegistry::View() {
  MutexLock lock(&mu_);
  ExpireLocked(now_());
  rpc::ClusterView view;
  view.set_epoch(epoch_);
  for (const auto& [id, entry] : workers_) *view.add_workers() = entry.info;
  view.set_heartbeat_interval_ms(static_cast<uint32_t>(interval_.count()));
  view.set_heartbeat_timeout_ms(static_cast<uint32_t>(timeout_.count()));
  return view;
}

void WorkerRegistry::Expire() {
  MutexLock lock(&mu_);
  ExpireLocked(now_());
}

void WorkerRegistry::Replace(const std::vector<rpc::WorkerInfo>& workers, uint64_t epoch) {
  MutexLock lock(&mu_);
  external_ = true;
  workers_.clear();
  for (const auto& w : workers) workers_[w.id()].info = w;
  epoch_ = epoch;
}

void WorkerRegistry::ExpireLocked(Clock::time_point now) {
  if (external_) return;  // the store's leases decide
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (now - it->second.last_seen <= timeout_) {
      ++it;
      continue;
    }
    spdlog::info("worker {} at {} left the cluster: no heartbeat for {}", it->first,
                 it->second.info.address(), FormatDuration(timeout_));
    it = workers_.erase(it);
    ++epoch_;
  }
}

void WorkerRegistry::UpsertLocked(const rpc::WorkerInfo& worker, Clock::time_point now) {
  auto [it, joined] = workers_.try_emplace(worker.id());
  Entry& entry = it->second;
  if (joined) {
    spdlog::info("worker {} joined the cluster at {} (capacity {})", worker.id(), worker.address(),
                 FormatByteSize(worker.capacity_bytes()));
    ++epoch_;
  } else if (std::string change = PlacementChange(entry.info, worker); !change.empty()) {
    spdlog::info("worker {} changed: {}", worker.id(), change);
    ++epoch_;
  }
  entry.info = worker;
  entry.last_seen = now;
}

void WorkerRegistry::DropAddressReuseLocked(const rpc::WorkerInfo& worker) {
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->first == worker.id() || it->second.info.address() != worker.address()) {
      ++it;
      continue;
    }
    spdlog::info("worker {} at {} left the cluster: worker {} now serves on that address",
                 it->first, worker.address(), worker.id());
    it = workers_.erase(it);
    ++epoch_;
  }
}

}  // namespace lakecache
