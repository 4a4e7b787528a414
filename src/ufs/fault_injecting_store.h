// FaultInjectingStore: an ObjectStore wrapper that fails or delays chosen calls, for tests.
//
// Tests add rules (which operation, which keys, what Status, how many times, how long to stall);
// calls no live rule matches pass through to the wrapped store, whose ownership is shared. Counts
// every call per operation so tests can pin the number of attempts. A rule may also let a read go
// through but make its reply name another version (a server that ignores If-Match and sends the
// bytes of a newer object). Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "ufs/object_store.h"

namespace lakecache {

enum class StoreOp { kList, kHead, kRead, kPut, kDelete, kAny };

struct FaultRule {
  static constexpr int kForever = -1;

  StoreOp op = StoreOp::kAny;
  std::string key_contains;  // "" matches every key; a List call matches on its prefix
  Status status;             // returned instead of calling through; OK only delays
  int times = kForever;      // how many matching calls the rule applies to
  Clock::duration delay{0};  // slept before failing or calling through
  // Reads only, with an OK status: the reply says this ETag / total size instead of its own.
  std::optional<std::string> reply_etag;
  std::optional<uint64_t> reply_object_size;
};

class FaultInjectingStore : public ObjectStoreWrapper {
 public:
  explicit FaultInjectingStore(std::shared_ptr<ObjectStore> inner);

  Result<ListPage> List(const ListRequest& request, const IoOptions& options) override;
  Result<ObjectInfo> Head(std::string_view key, const IoOptions& options) override;
  Result<ReadReply> ReadRaw(std::string_view key, uint64_t offset,
                            std::span<const std::span<char>> bufs,
                            const ReadOptions& options) override;
  Status Put(std::string_view key, std::span<const char> data, const IoOptions& options) override;
  Status Delete(std::string_view key, const IoOptions& options) override;

  // Rules apply in the order added: a call takes the first matching rule with uses left.
  void AddRule(FaultRule rule);
  // Shorthands for AddRule: fail the next `times` matching calls, or every one.
  void FailNext(StoreOp op, Status status, int times = 1, std::string key_contains = "");
  void FailAlways(StoreOp op, Status status, std::string key_contains = "");
  // The next `times` reads of matching keys go through, but their replies name `etag` (and
  // `object_size`, when given) as their version.
  void ReplyWithVersion(std::string etag, std::optional<uint64_t> object_size,
                        int times = FaultRule::kForever, std::string key_contains = "");
  void ClearRules();

  // Calls made to this store, failed ones included; kAny gives the total.
  int64_t Calls(StoreOp op) const;
  void ResetCalls();

  // Errors shaped like S3Store's, naming Describe() + "/" + key (Describe() alone for ""):
  // "s3://bucket/key: HTTP 503 SlowDown: Please reduce your request rate".
  Status ServerError(std::string_view key) const;      // kUnavailable, HTTP 503 SlowDown
  Status AccessDenied(std::string_view key) const;     // kAccessDenied, HTTP 403
  Status NotFound(std::string_view key) const;         // kNotFound, HTTP 404 NoSuchKey
  Status ConnectionReset(std::string_view key) const;  // kUnavailable, no HTTP answer

 private:
  static constexpr size_t kOps = static_cast<size_t>(StoreOp::kAny);

  // Counts the call, then applies the first matching rule: its delay, then its Status (OK: go on).
  // Returns the rule applied (a default rule when none matched).
  FaultRule Intercept(StoreOp op, std::string_view key);
  std::string Target(std::string_view key) const {
    return key.empty() ? Describe() : Describe() + "/" + std::string(key);
  }

  std::array<std::atomic<int64_t>, kOps> calls_{};
  Mutex mu_;
  std::vector<FaultRule> rules_ GUARDED_BY(mu_);
};

}  // namespace lakecache
