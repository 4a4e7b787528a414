// ThreadPool: a fixed set of worker threads running submitted tasks in FIFO order.
//
// Thread-safe: Submit may be called from any thread, including from a task. The destructor stops
// accepting work, finishes the queued tasks, and joins the threads.
#pragma once

#include <deque>
#include <functional>
#include <future>
#include <thread>
#include <type_traits>
#include <vector>

#include "common/mutex.h"

namespace lakecache {

class ThreadPool {
 public:
  explicit ThreadPool(size_t threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Post(std::function<void()> task);

  // Runs fn on the pool and returns a future for its result.
  template <typename Fn>
  auto Submit(Fn fn) -> std::future<std::invoke_result_t<Fn>> {
    using R = std::invoke_result_t<Fn>;
    auto task = std::make_shared<std::packaged_task<R()>>(std::move(fn));
    std::future<R> fut = task->get_future();
    Post([task] { (*task)(); });
    return fut;
  }

  size_t size() const { return threads_.size(); }

 private:
  void Run();

  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> queue_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace lakecache
