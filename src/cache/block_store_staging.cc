// BlockStore's read-ahead: blocks prefetched off the readers' threads into staging, within the
// memory budget, and taken from there by the first read (block_store.h).
#include <algorithm>
#include <vector>

#include "cache/block_store.h"
#include "cache/block_store_parts.h"

namespace lakecache {
namespace {

// A staged block this young is kept even when the budget is needed: its reader is probably on the
// way (dropping it would waste its GET). Older unread ones are dropped first when the budget is
// needed; those staged longer than kStagedExpiry are dropped anyway.
constexpr auto kStagedPatience = std::chrono::milliseconds(500);
constexpr auto kStagedExpiry = std::chrono::seconds(30);
}  // namespace

BlockStore::PrefetchResult BlockStore::Prefetch(const BlockRequest& request, BlockSource source,
                                                ThreadPool& pool) {
  // A block only on disk is prefetched too: loaded (and verified) ahead of the reader, off its
  // thread, into staging.
  if (InMemory(request.key) || IsStaged(request.key) || InFlight(request.key)) {
    return PrefetchResult::kPresent;
  }
  if (!ReserveForPrefetch(request.length)) {
    Counters::Add(counters_->prefetch_refused);
    return PrefetchResult::kNoBudget;
  }
  // Decided now for the caller, which groups the blocks it fetches from the store into runs: a
  // block a lower tier holds must not be one of them (the run's request would fetch it anyway).
  const PrefetchResult started =
      InLowerTier(request.key) ? PrefetchResult::kLoading : PrefetchResult::kStarted;
  auto flight = std::make_shared<Flight>();
  flight->prefetch = true;
  {
    MutexLock lock(&flights_mu_);
    // The flight starts now, not when the pool gets to it: a reader that reaches the block while
    // the task waits in the pool's queue joins it rather than fetching the block a second time.
    // (The re-checks: a reader may have fetched it since the checks above.)
    if (!flights_.try_emplace(request.key, flight).second || InMemory(request.key) ||
        IsStaged(request.key)) {
      if (flights_[request.key] == flight) flights_.erase(request.key);
      budget_->Release(request.length);
      return PrefetchResult::kPresent;
    }
  }
  pool.Post([this, request, source = std::move(source), flight = std::move(flight)] {
    RunPrefetch(request, source, *flight);
  });
  return started;
}

void BlockStore::RunPrefetch(const BlockRequest& request, const BlockSource& source,
                             Flight& flight) {
  Result<BlockRef> result = Status::NotFound("");
  int from_tier = -1;
  if (BlockRef block = LoadFromLowerTier(request.key, &from_tier)) {
    result = std::move(block);
  } else {
    result = CallSource(request, source, "read-ahead fetch");
    Counters::Add(counters_->prefetches);
  }
  if (result.ok()) {
    MutexLock lock(&staging_mu_);
    staging_[request.key] = Staged{*result, clock_->Now(), from_tier};
  } else {
    budget_->Release(request.length);
  }
  {
    MutexLock lock(&flights_mu_);
    flights_.erase(request.key);
  }
  flight.Finish(result);
}

bool BlockStore::InMemory(const BlockKey& key) const {
  for (const auto& tier : tiers_) {
    if (tier->resident() && tier->Contains(key)) return true;
  }
  return false;
}

bool BlockStore::InLowerTier(const BlockKey& key) const {
  for (const auto& tier : tiers_) {
    if (!tier->resident() && tier->Contains(key)) return true;
  }
  return false;
}

BlockRef BlockStore::LoadFromLowerTier(const BlockKey& key, int* from_tier) {
  for (size_t i = 0; i < tiers_.size(); ++i) {
    const auto& tier = tiers_[i];
    if (tier->resident() || !tier->Contains(key)) continue;  // Contains: no miss counted
    Result<BlockRef> block = tier->Get(key);
    if (!block.ok()) continue;
    *from_tier = static_cast<int>(i);
    return std::move(block).value();
  }
  return nullptr;
}

bool BlockStore::IsStaged(const BlockKey& key) {
  MutexLock lock(&staging_mu_);
  return staging_.contains(key);
}

BlockRef BlockStore::AdmitStaged(const BlockRequest& request) {
  BlockRef block;
  int from_tier = -1;
  {
    MutexLock lock(&staging_mu_);
    auto it = staging_.find(request.key);
    if (it == staging_.end()) return nullptr;
    block = it->second.block;
    if (it->second.admitting) return block;  // another reader is offering it: share the bytes
    it->second.admitting = true;
    from_tier = it->second.from_tier;
  }
  Counters::Add(counters_->prefetch_used);
  if (from_tier >= 0) Counters::Add(counters_->hit_bytes[from_tier], block->size());
  // Read now, so an access: the policies see it as the miss it was in the tiers. It stays staged
  // until the tiers hold it: a concurrent read of the block (FUSE hands the parts of one read to
  // several threads) must find it somewhere, or it fetches the block again.
  Offer(request, block, tiers_.size());
  {
    MutexLock lock(&staging_mu_);
    staging_.erase(request.key);
  }
  budget_->Release(block->size());
  return block;
}

void BlockStore::DropStaged(const BlockKey& key) {
  BlockRef block;
  {
    MutexLock lock(&staging_mu_);
    auto it = staging_.find(key);
    if (it == staging_.end() || it->second.admitting) return;
    block = std::move(it->second.block);
    staging_.erase(it);
  }
  budget_->Release(block->size());
  Counters::Add(counters_->prefetch_dropped);
}

bool BlockStore::ReserveForPrefetch(uint64_t need) {
  if (budget_->TryAcquire(need)) return true;
  auto now = clock_->Now();
  std::vector<BlockRef> dropped;  // freed outside the lock
  bool reserved = false;
  {
    MutexLock lock(&staging_mu_);
    std::erase_if(staging_, [&](auto& entry) {
      if (entry.second.admitting || now - entry.second.since < kStagedExpiry) return false;
      dropped.push_back(std::move(entry.second.block));
      return true;
    });
    for (const BlockRef& block : dropped) budget_->Release(block->size());
    reserved = budget_->TryAcquire(need);
    while (!reserved) {
      auto oldest = staging_.end();
      for (auto it = staging_.begin(); it != staging_.end(); ++it) {
        if (it->second.admitting || now - it->second.since < kStagedPatience) continue;
        if (oldest == staging_.end() || it->second.since < oldest->second.since) oldest = it;
      }
      if (oldest == staging_.end()) break;
      budget_->Release(oldest->second.block->size());
      dropped.push_back(std::move(oldest->second.block));
      staging_.erase(oldest);
      reserved = budget_->TryAcquire(need);
    }
  }
  Counters::Add(counters_->prefetch_dropped, dropped.size());
  return reserved;
}

}  // namespace lakecache
