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

enum class StoreOp {
  kList,
  kHead,
  kRead,
  kPut,
  kDelete,
  kCopy,
  kCreateUpload,    // CreateMultipartUpload
  kUploadPart,      // see FaultRule::part_number
  kCompleteUpload,  // CompleteMultipartUpload
  kAbortUpload,     // AbortMultipartUpload
  kListUploads,     // ListMultipartUploads; matches on its prefix
  kAny,             // last: the count of the others
};

struct FaultRule {
  static constexpr int kForever = -1;

  StoreOp op = StoreOp::kAny;
  std::string key_contains;  // "" matches every key; a List call matches on its prefix
  Status status;             // returned instead of calling through; OK only delays
  int times = kForever;      // how many matching calls the rule applies to
  Clock::duration delay{0};  // waited before failing or calling through; EndDelays ends it
  // Reads only, with an OK status: the reply says this ETag / total size instead of its own.
  std::optional<std::string> reply_etag;
  std::optional<uint64_t> reply_object_size;
  int part_number = 0;  // UploadPart only: the part this rule fails; 0 matches every part
  // The call goes through to the store, and then `status` is returned instead of its reply: a
  // write that was done but whose answer was lost on the way back.
  bool after_call = false;
};

class FaultInjectingStore : public ObjectStoreWrapper {
 public:
  explicit FaultInjectingStore(std::shared_ptr<ObjectStore> inner);

  Result<ListPage> List(const ListRequest& request, const IoOptions& options) override;
  Result<ObjectInfo> Head(std::string_view key, const IoOptions& options) override;
  Result<ReadReply> ReadRaw(std::string_view key, uint64_t offset,
                            std::span<const std::span<char>> bufs,
                            const ReadOptions& options) override;
  Result<ObjectInfo> Put(std::string_view key, std::span<const char> data,
                         const PutOptions& options) override;
  Status Delete(std::string_view key, const IoOptions& options) override;
  Result<ObjectInfo> Copy(std::string_view from_key, std::string_view to_key,
                          const IoOptions& options) override;  // matches on to_key
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
  // The calls waiting out a delay go on now, and the rules delay no call from now on: a test ends
  // a stall it made when it has seen what the stall was for.
  void EndDelays();

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
  FaultRule Intercept(StoreOp op, std::string_view key, int part_number = 0);
  // Intercept, then `call` unless the rule fails the call first; an after_call rule's Status
  // replaces the reply.
  template <typename Call>
  auto Run(StoreOp op, std::string_view key, int part_number, const Call& call)
      -> decltype(call()) {
    FaultRule rule = Intercept(op, key, part_number);
    if (!rule.after_call && !rule.status.ok()) return rule.status;
    auto reply = call();
    if (rule.after_call && !rule.status.ok()) return rule.status;
    return reply;
  }
  std::string Target(std::string_view key) const {
    return key.empty() ? Describe() : Describe() + "/" + std::string(key);
  }

  std::array<std::atomic<int64_t>, kOps> calls_{};
  Mutex mu_;
  std::vector<FaultRule> rules_ GUARDED_BY(mu_);
  CondVar delays_ended_cv_;
  uint64_t delays_ended_ GUARDED_BY(mu_) = 0;  // how many times EndDelays was called
};

}  // namespace lakecache
