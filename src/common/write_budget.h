// WriteBudget: the memory that every file being written through a mount may hold at once.
//
// Writers take bytes before they fill them and give them back once their part is uploaded; a
// writer that finds the budget used up waits for another to give some back (it never fails and
// never drops bytes). Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>

#include "common/mutex.h"

namespace lakecache {

class WriteBudget {
 public:
  explicit WriteBudget(uint64_t capacity) : capacity_(capacity) {}

  // Waits until `bytes` fit, then takes them. REQUIRES: bytes <= capacity().
  void Acquire(uint64_t bytes) EXCLUDES(mu_);
  // Waits until `bytes` fit, at most until `deadline`; false when they did not fit by then.
  bool AcquireUntil(uint64_t bytes, std::chrono::steady_clock::time_point deadline) EXCLUDES(mu_);
  // Takes `bytes` if they fit now.
  bool TryAcquire(uint64_t bytes) EXCLUDES(mu_);
  void Release(uint64_t bytes) EXCLUDES(mu_);

  uint64_t capacity() const { return capacity_; }
  uint64_t used() const EXCLUDES(mu_);
  uint64_t peak() const EXCLUDES(mu_);
  // How many Acquire calls had to wait.
  uint64_t waits() const EXCLUDES(mu_);

 private:
  const uint64_t capacity_;
  mutable Mutex mu_;
  CondVar freed_;
  uint64_t used_ GUARDED_BY(mu_) = 0;
  uint64_t peak_ GUARDED_BY(mu_) = 0;
  uint64_t waits_ GUARDED_BY(mu_) = 0;
};

}  // namespace lakecache
