// RetryingStore: an ObjectStore wrapper that repeats calls failing with a retryable Status.
//
// Exponential backoff with full jitter, capped per sleep; 404/403/precondition errors return at
// once. The IoOptions deadline bounds the total: a retry that could not start before it ends the
// call with kDeadlineExceeded naming the last error. Shares ownership of the wrapped store;
// thread-safe if it and the policy's sleep/now functions are.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <string_view>

#include "common/mutex.h"
#include "ufs/object_store.h"

namespace lakecache {

struct RetryPolicy {
  int max_attempts = 5;  // attempts in all, the first included; values below 1 mean 1
  Clock::duration initial_backoff = std::chrono::milliseconds(100);
  Clock::duration max_backoff = std::chrono::seconds(5);
  double multiplier = 2.0;
  // Full jitter: each sleep is uniform in [0, backoff], which spreads out clients that failed
  // together. Tests turn it off to see the exact schedule.
  bool jitter = true;
  uint64_t seed = 0;  // for the jitter; 0 seeds from std::random_device

  // Seams for tests: how to wait, and the clock the deadline is compared with.
  std::function<void(Clock::duration)> sleep;  // default: std::this_thread::sleep_for
  std::function<Clock::time_point()> now;      // default: Clock::now
};

class RetryingStore : public ObjectStoreWrapper {
 public:
  explicit RetryingStore(std::shared_ptr<ObjectStore> inner, RetryPolicy policy = {});

  Result<ListPage> List(const ListRequest& request, const IoOptions& options) override;
  Result<ObjectInfo> Head(std::string_view key, const IoOptions& options) override;
  Result<ReadReply> ReadRaw(std::string_view key, uint64_t offset,
                            std::span<const std::span<char>> bufs,
                            const ReadOptions& options) override;
  Status Put(std::string_view key, std::span<const char> data, const IoOptions& options) override;
  Status Delete(std::string_view key, const IoOptions& options) override;

 private:
  // Runs `attempt` until it succeeds, fails for good, runs out of attempts or would retry past the
  // deadline. `op` and `key` (the prefix for List) name the call in logs and messages.
  Status Retry(std::string_view op, std::string_view key, const IoOptions& options,
               const std::function<Status()>& attempt);
  // The sleep before retry number `retry` (1 for the first retry), jitter applied.
  Clock::duration Backoff(int retry);
  std::string Target(std::string_view key) const {
    return key.empty() ? Describe() : Describe() + "/" + std::string(key);
  }

  const RetryPolicy policy_;
  Mutex rng_mu_;
  std::mt19937_64 rng_ GUARDED_BY(rng_mu_);
};

}  // namespace lakecache
