#include "cache/lru_policy.h"

namespace lakecache {

LruPolicy::LruPolicy(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

void LruPolicy::OnHit(const BlockKey& key) {
  MutexLock lock(&mu_);
  TouchLocked(key);
}

bool LruPolicy::OnMiss(const BlockKey& key, uint64_t bytes, std::vector<BlockKey>* evict) {
  MutexLock lock(&mu_);
  // A caller that breaks the REQUIRES gets a hit rather than a second copy in the accounting.
  if (TouchLocked(key)) return true;
  if (bytes > capacity_) return false;
  InsertLocked(key, bytes, evict);
  return true;
}

void LruPolicy::Restore(const BlockKey& key, uint64_t bytes, std::vector<BlockKey>* evict) {
  MutexLock lock(&mu_);
  if (index_.contains(key)) return;
  if (bytes > capacity_) {
    evict->push_back(key);  // the tier holds it, but it can never fit
    return;
  }
  InsertLocked(key, bytes, evict);
}

void LruPolicy::Remove(const BlockKey& key) {
  MutexLock lock(&mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return;
  used_ -= it->second->bytes;
  order_.erase(it->second);
  index_.erase(it);
}

uint64_t LruPolicy::used_bytes() const {
  MutexLock lock(&mu_);
  return used_;
}

bool LruPolicy::TouchLocked(const BlockKey& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  order_.splice(order_.begin(), order_, it->second);
  return true;
}

void LruPolicy::InsertLocked(const BlockKey& key, uint64_t bytes, std::vector<BlockKey>* evict) {
  while (used_ + bytes > capacity_) {
    const Block& victim = order_.back();
    evict->push_back(victim.key);
    used_ -= victim.bytes;
    index_.erase(victim.key);
    order_.pop_back();
  }
  order_.push_front(Block{key, bytes});
  index_.emplace(key, order_.begin());
  used_ += bytes;
}

}  // namespace lakecache
