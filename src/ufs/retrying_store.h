// RetryingStore: an ObjectStore wrapper that repeats calls failing with a retryable Status.
//
// Exponential backoff with full jitter, capped per sleep; 404/403/precondition errors return at
// once. The IoOptions deadline bounds the total: a retry that could not start before it ends the
// call with kDeadlineExceeded naming the last error. Writes are retried by the rules in
// object_store.h; two repeats look at the key when they cannot tell success from failure: a
// create-only Put that finds the key taken and a CompleteMultipartUpload that finds its upload
// gone count as done when Head shows the object they would have made (Put: the body's MD5 as
// ETag and its size; Complete: IsObjectOfUpload). The backoff is slept on the policy's clock,
// which the deadline is compared with. Shares ownership of the wrapped store; thread-safe if it is.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <string_view>

#include "common/clock.h"
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

  // Sleeps the backoff and reads the time the deadline is compared with; a test's fake clock
  // sleeps none. Must outlive the store.
  const SteadyClock* clock = SteadyClock::Real();
};

class RetryingStore : public ObjectStoreWrapper {
 public:
  explicit RetryingStore(std::shared_ptr<ObjectStore> inner, RetryPolicy policy = {});

  Result<ListPage> List(const ListRequest& request, const IoOptions& options) override;
  Result<ObjectInfo> Head(std::string_view key, const IoOptions& options) override;
  Result<ReadReply> ReadRaw(std::string_view key, uint64_t offset,
                            std::span<const std::span<char>> bufs,
                            const ReadOptions& options) override;
  Result<ObjectInfo> Put(std::string_view key, std::span<const char> data,
                         const PutOptions& options) override;
  Status Delete(std::string_view key, const IoOptions& options) override;
  Result<ObjectInfo> Copy(std::string_view from_key, std::string_view to_key,
                          const IoOptions& options) override;
  Result<std::string> CreateMultipartUpload(std::string_view key,
                                            const IoOptions& options) override;
  Result<std::string> UploadPart(std::string_view key, std::string_view upload_id, int part_number,
                                 std::span<const char> data, const IoOptions& options) override;
  Result<ObjectInfo> CompleteMultipartUpload(std::string_view key, std::string_view upload_id,
                                             const std::vector<CompletedPart>& parts,
                                             const IoOptions& options) override;
  Status AbortMultipartUpload(std::string_view key, std::string_view upload_id,
                              const IoOptions& options) override;
  Result<std::vector<PendingUpload>> ListMultipartUploads(std::string_view prefix,
                                                          const IoOptions& options) override;

 private:
  // Runs `attempt` until it succeeds, fails for good, runs out of attempts or would retry past the
  // deadline. `op` and `key` (the prefix for List) name the call in logs and messages.
  Status Retry(std::string_view op, std::string_view key, const IoOptions& options,
               const std::function<Status()>& attempt);
  // After a repeated write failed with `status`: the object at `key` if Head shows it is the
  // one the write would have made (`made`), else `status`.
  Result<ObjectInfo> AcceptIfWritten(std::string_view key, const Status& status,
                                     const IoOptions& options,
                                     const std::function<bool(const ObjectInfo&)>& made);
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
