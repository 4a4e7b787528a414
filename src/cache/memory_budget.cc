#include "cache/memory_budget.h"

namespace lakecache {

bool MemoryBudget::TryAcquire(uint64_t bytes) {
  uint64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (used + bytes > capacity_) return false;
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  NotePeak(used + bytes);
  return true;
}

void MemoryBudget::ForceAcquire(uint64_t bytes) {
  NotePeak(used_.fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

void MemoryBudget::Release(uint64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }

void MemoryBudget::NotePeak(uint64_t used) {
  uint64_t peak = peak_.load(std::memory_order_relaxed);
  while (used > peak && !peak_.compare_exchange_weak(peak, used, std::memory_order_relaxed)) {
  }
}

}  // namespace lakecache
