#include "worker/replica_ledger.h"

#include "cache/block_store.h"

namespace lakecache {

void ReplicaLedger::Add(const BlockKey& key, uint64_t bytes) {
  MutexLock lock(&mu_);
  auto [it, added] = sizes_.try_emplace(key, bytes);
  if (!added) return;
  order_.push_back(key);
  bytes_ += bytes;
  while (bytes_ > capacity_ && !order_.empty()) EraseOldest();
}

void ReplicaLedger::MakeRoom(uint64_t bytes) {
  MutexLock lock(&mu_);
  while (!order_.empty() && !blocks_->HasRoomInMemory(bytes)) EraseOldest();
}

void ReplicaLedger::EraseOldest() {
  const BlockKey key = order_.front();
  order_.pop_front();
  auto it = sizes_.find(key);
  bytes_ -= it->second;
  sizes_.erase(it);
  ++erased_;
  blocks_->Erase(key);
}

bool ReplicaLedger::Contains(const BlockKey& key) const {
  MutexLock lock(&mu_);
  return sizes_.contains(key);
}

uint64_t ReplicaLedger::bytes() const {
  MutexLock lock(&mu_);
  return bytes_;
}

size_t ReplicaLedger::count() const {
  MutexLock lock(&mu_);
  return sizes_.size();
}

uint64_t ReplicaLedger::erased() const {
  MutexLock lock(&mu_);
  return erased_;
}

}  // namespace lakecache
