// BoundedQueue: a FIFO of at most `capacity` items between producers and consumers; a producer
// waits while it is full, so the two sides go at the pace of the slower one and the items between
// them stay bounded. Closing it (either side) ends it: Push fails from then on, and Pop drains
// what is left, then says it is closed. Thread-safe.
#pragma once

#include <algorithm>
#include <deque>

#include "common/mutex.h"

namespace lakecache {

template <typename T>
class BoundedQueue {
 public:
  enum class Popped { kItem, kTimeout, kClosed };

  // REQUIRES: capacity > 0.
  explicit BoundedQueue(size_t capacity) : capacity_(capacity) {}

  // Waits for room; false (and `item` dropped) once the queue is closed.
  bool Push(T item) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    while (!closed_ && items_.size() >= capacity_) room_.Wait(&mu_);
    if (closed_) return false;
    items_.push_back(std::move(item));
    max_size_ = std::max(max_size_, items_.size());
    ready_.Signal();
    return true;
  }

  // The next item into `out`; kTimeout once `deadline` has passed with none; kClosed when closed
  // and empty.
  Popped Pop(T* out, CondVar::Clock::time_point deadline) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    while (items_.empty() && !closed_) {
      if (!ready_.WaitUntil(&mu_, deadline) && items_.empty() && !closed_) return Popped::kTimeout;
    }
    if (items_.empty()) return Popped::kClosed;
    *out = std::move(items_.front());
    items_.pop_front();
    room_.Signal();
    return Popped::kItem;
  }

  void Close() EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    closed_ = true;
    room_.SignalAll();
    ready_.SignalAll();
  }

  // The most items it held at once.
  size_t max_size() const EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return max_size_;
  }

 private:
  const size_t capacity_;
  mutable Mutex mu_;
  CondVar room_;   // signalled when an item leaves
  CondVar ready_;  // signalled when an item comes or the queue closes
  std::deque<T> items_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;
  size_t max_size_ GUARDED_BY(mu_) = 0;
};

}  // namespace lakecache
