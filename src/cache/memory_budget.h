// MemoryBudget: one byte semaphore for the block data a mount holds outside its cache tiers
// (demand fetches in flight, prefetched blocks waiting in staging).
//
// Prefetch reserves with TryAcquire and simply does less when it fails; demand fetches use
// ForceAcquire, which counts their bytes (so prefetch backs off) but never blocks or fails a
// reader. Every acquire is paired with a Release of the same bytes. Lock-free; thread-safe.
#pragma once

#include <atomic>
#include <cstdint>

namespace lakecache {

class MemoryBudget {
 public:
  explicit MemoryBudget(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // Reserves `bytes` if they fit within the capacity; false (nothing reserved) otherwise.
  bool TryAcquire(uint64_t bytes);
  // Reserves `bytes` even beyond the capacity.
  void ForceAcquire(uint64_t bytes);
  // REQUIRES: `bytes` were acquired earlier and not yet released.
  void Release(uint64_t bytes);

  uint64_t capacity() const { return capacity_; }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  // The most bytes ever held at once.
  uint64_t peak() const { return peak_.load(std::memory_order_relaxed); }

 private:
  void NotePeak(uint64_t used);

  const uint64_t capacity_;
  std::atomic<uint64_t> used_{0};
  std::atomic<uint64_t> peak_{0};
};

}  // namespace lakecache
