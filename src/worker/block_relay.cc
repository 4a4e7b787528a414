#include "worker/block_relay.h"

#include <algorithm>

namespace lakecache {

void BlockRelay::Landed(uint64_t bytes) {
  {
    MutexLock lock(&mu_);
    landed_ = std::max(landed_, std::min(bytes, length_));
  }
  landed_cv_.SignalAll();
}

void BlockRelay::Fail() {
  {
    MutexLock lock(&mu_);
    failed_ = true;
  }
  landed_cv_.SignalAll();
}

Result<uint64_t> BlockRelay::WaitFor(uint64_t want,
                                     std::chrono::steady_clock::time_point deadline) {
  want = std::min(want, length_);
  MutexLock lock(&mu_);
  while (!failed_ && landed_ < want) {
    if (!landed_cv_.WaitUntil(&mu_, deadline) && !failed_ && landed_ < want) {
      return Status::DeadlineExceeded("the block being relayed stopped arriving");
    }
  }
  if (landed_ < want) return Status::Unavailable("the block being relayed failed upstream");
  return landed_;
}

std::shared_ptr<BlockRelay> RelayTable::Find(const BlockKey& key) const {
  MutexLock lock(&mu_);
  auto it = relays_.find(key);
  return it == relays_.end() ? nullptr : it->second;
}

void RelayTable::Add(const BlockKey& key, std::shared_ptr<BlockRelay> relay) {
  MutexLock lock(&mu_);
  relays_[key] = std::move(relay);
}

void RelayTable::Remove(const BlockKey& key, const BlockRelay* relay) {
  MutexLock lock(&mu_);
  auto it = relays_.find(key);
  if (it != relays_.end() && it->second.get() == relay) relays_.erase(it);
}

}  // namespace lakecache
