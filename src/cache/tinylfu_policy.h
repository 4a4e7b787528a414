// TinyLfuPolicy: the default eviction policy, frequency-gated admission in front of a CLOCK region.
//
// A missed block enters a small FIFO window (~1% of capacity, at least a few blocks). When the
// window overflows, its oldest block c may replace the CLOCK victim v only if v looks abandoned
// (not read for ~3 dataset passes, so a new dataset takes over) or if c is clearly more frequent
// (freq(c) > freq(v) + 2): a one-pass scan, or the part of an epoch that does not fit, cannot flush
// blocks that are read every epoch, so each epoch after the first hits ~capacity/dataset.
// With Admission::kOnMiss there is no window: a missed block takes that test at once, so OnMiss's
// answer is final (a disk tier writes only the blocks that passed).
// Thread-safe. One structure, not shards, so capacity is exact at any size: OnMiss, Restore and
// Remove take the policy mutex (a miss costs an object-store fetch anyway), while OnHit takes only
// one of 64 index-shard locks and updates atomics (sketch counters, reference bit, last-access
// tick). Decisions depend only on the sequence of calls and the seed.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cache/eviction_policy.h"
#include "common/mutex.h"

namespace lakecache {

class TinyLfuPolicy final : public EvictionPolicy {
 public:
  TinyLfuPolicy(uint64_t capacity_bytes, uint64_t seed,
                Admission admission = Admission::kAfterWindow);
  ~TinyLfuPolicy() override;

  std::string_view name() const override { return "tinylfu"; }
  void OnHit(const BlockKey& key) override;
  bool OnMiss(const BlockKey& key, uint64_t bytes, std::vector<BlockKey>* evict) override;
  void Restore(const BlockKey& key, uint64_t bytes, std::vector<BlockKey>* evict) override;
  void Remove(const BlockKey& key) override;
  uint64_t capacity_bytes() const override { return capacity_; }
  uint64_t used_bytes() const override;

  // The current estimate of distinct blocks read recently (at least the capacity in blocks); it
  // sizes the sketch, the halving period and the staleness horizon. For tests and diagnostics.
  uint64_t estimated_dataset_blocks() const;

 private:
  class FrequencySketch;  // count-min, 4-bit counters; lock-free increments
  class DistinctCounter;  // HyperLogLog over the last two halving periods

  struct Entry {
    Entry(const BlockKey& k, uint64_t h, uint64_t b, uint64_t now) : key(k), hash(h), bytes(b) {
      last.store(now, std::memory_order_relaxed);
    }
    const BlockKey key;
    const uint64_t hash;
    const uint64_t bytes;
    std::atomic<bool> ref{false};  // CLOCK reference bit, set by hits
    std::atomic<uint64_t> last;    // tick of the latest access
    bool in_window GUARDED_BY(&TinyLfuPolicy::mu_) = true;
    std::list<Entry*>::iterator pos GUARDED_BY(&TinyLfuPolicy::mu_);  // in window_ or main_
  };

  // Hits look blocks up here without the policy mutex. Entries are created and destroyed only under
  // mu_ plus the shard's lock, and a hit touches its entry while holding the shard's lock.
  struct alignas(64) IndexShard {
    Mutex mu;
    std::unordered_map<BlockKey, std::unique_ptr<Entry>, BlockKeyHash> map GUARDED_BY(mu);
  };
  static constexpr size_t kIndexShards = 64;

  uint64_t Hash(const BlockKey& key) const;
  IndexShard& ShardOf(uint64_t hash) { return shards_[hash >> 58]; }
  // Counts one access in the sketch and the distinct counter; returns its tick.
  uint64_t CountAccess(uint64_t hash);

  // The policy's state, under mu_.
  Entry* Find(const BlockKey& key, uint64_t hash) REQUIRES(mu_);
  // Create adds to the index only; the caller links the entry into the window or the CLOCK ring.
  Entry* Create(const BlockKey& key, uint64_t hash, uint64_t bytes, uint64_t now) REQUIRES(mu_);
  // REQUIRES: e is unlinked. Frees it.
  void Destroy(Entry* e) REQUIRES(mu_);
  // Sizes the window from the largest block seen (the policy is told sizes, not a block size).
  void NoteBlockSize(uint64_t bytes) REQUIRES(mu_);
  uint64_t CapacityBlocks() const REQUIRES(mu_);
  // Re-estimates the dataset size and halves the sketch when due.
  void Maintain(uint64_t now) REQUIRES(mu_);
  // Pops the window's oldest blocks while it overflows or the cache is over capacity; returns
  // whether `fresh` (the block being admitted) survived.
  bool DrainWindow(const Entry* fresh, uint64_t now, std::vector<BlockKey>* evict) REQUIRES(mu_);
  // Moves c (already out of the window) into the CLOCK region, evicting the victims it beats;
  // false when c loses and must be dropped.
  bool Promote(Entry* c, uint64_t now, std::vector<BlockKey>* evict) REQUIRES(mu_);
  bool Beats(const Entry& c, const Entry& v, uint64_t now) const REQUIRES(mu_);
  // The block under the clock hand after skipping (and clearing) referenced ones; null if empty.
  Entry* ClockVictim() REQUIRES(mu_);
  void AddToWindow(Entry* e) REQUIRES(mu_);
  // Inserts just behind the hand, so a new block is the last the hand reaches.
  void AddToMain(Entry* e) REQUIRES(mu_);
  void Unlink(Entry* e) REQUIRES(mu_);
  void AdvanceHand() REQUIRES(mu_);
  uint64_t UsedLocked() const REQUIRES(mu_) { return main_bytes_ + window_bytes_; }

  const uint64_t capacity_;
  const uint64_t seed_;
  const bool windowed_;           // Admission::kAfterWindow
  std::atomic<uint64_t> now_{0};  // access tick: hits and misses
  std::unique_ptr<FrequencySketch> sketch_;
  std::unique_ptr<DistinctCounter> distinct_;
  std::array<IndexShard, kIndexShards> shards_;

  mutable Mutex mu_;
  std::list<Entry*> window_ GUARDED_BY(mu_);          // newest first
  std::list<Entry*> main_ GUARDED_BY(mu_);            // CLOCK ring
  std::list<Entry*>::iterator hand_ GUARDED_BY(mu_);  // main_.end() iff main_ is empty
  uint64_t window_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t main_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t window_capacity_ GUARDED_BY(mu_) = 0;
  uint64_t max_block_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t dataset_blocks_ GUARDED_BY(mu_) = 0;
  uint64_t stale_ticks_ GUARDED_BY(mu_) = 0;
  uint64_t next_estimate_ GUARDED_BY(mu_) = 0;
  uint64_t last_halving_ GUARDED_BY(mu_) = 0;
};

}  // namespace lakecache
