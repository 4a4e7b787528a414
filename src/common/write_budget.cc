#include "common/write_budget.h"

#include <algorithm>

namespace lakecache {

void WriteBudget::Acquire(uint64_t bytes) {
  MutexLock lock(&mu_);
  if (used_ + bytes > capacity_) ++waits_;
  while (used_ + bytes > capacity_) freed_.Wait(&mu_);
  used_ += bytes;
  peak_ = std::max(peak_, used_);
}

bool WriteBudget::AcquireUntil(uint64_t bytes, std::chrono::steady_clock::time_point deadline) {
  MutexLock lock(&mu_);
  if (used_ + bytes > capacity_) ++waits_;
  while (used_ + bytes > capacity_) {
    if (!freed_.WaitUntil(&mu_, deadline) && used_ + bytes > capacity_) return false;
  }
  used_ += bytes;
  peak_ = std::max(peak_, used_);
  return true;
}

bool WriteBudget::TryAcquire(uint64_t bytes) {
  MutexLock lock(&mu_);
  if (used_ + bytes > capacity_) return false;
  used_ += bytes;
  peak_ = std::max(peak_, used_);
  return true;
}

void WriteBudget::Release(uint64_t bytes) {
  {
    MutexLock lock(&mu_);
    used_ -= std::min(used_, bytes);
  }
  freed_.SignalAll();
}

uint64_t WriteBudget::used() const {
  MutexLock lock(&mu_);
  return used_;
}

uint64_t WriteBudget::peak() const {
  MutexLock lock(&mu_);
  return peak_;
}

uint64_t WriteBudget::waits() const {
  MutexLock lock(&mu_);
  return waits_;
}

}  // namespace lakecache
