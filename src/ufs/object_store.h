// ObjectStore: the under-storage interface, what lakecache needs from S3, OSS or a local directory.
//
// Keys are relative to the store's bucket (or root folder), never starting with '/'. Every call
// takes IoOptions carrying its deadline. Errors are Status codes: kNotFound (no such key/bucket),
// kAccessDenied (403, bad credentials), kUnavailable (transient: 5xx, SlowDown, timeout, reset;
// retry), kPreconditionFailed (the object changed under If-Match); anything else is final. Messages
// name the bucket, the key and the HTTP status. Implementations are thread-safe; behaviour such as
// retries or fault injection is added by wrapping (ObjectStoreWrapper: RetryingStore,
// FaultInjectingStore), not by flags.
//
// Versions are exact: every read reply says which version its bytes came from (ETag, total size),
// and Read/ReadV check it against the version the caller names (ReadOptions::if_match,
// object_size). Bytes of any other version fail with kPreconditionFailed, so nothing above this
// interface can cache them under the wrong key, whether or not the server honoured If-Match.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"

namespace lakecache {

using Clock = std::chrono::steady_clock;

struct IoOptions {
  // The call (retries included) gives up with kDeadlineExceeded after this point.
  Clock::time_point deadline = Clock::time_point::max();

  static IoOptions WithTimeout(Clock::duration timeout) { return {Clock::now() + timeout}; }
};

struct ObjectInfo {
  std::string key;
  uint64_t size = 0;
  std::string etag;   // without quotes
  int64_t mtime = 0;  // seconds since the epoch, 0 if unknown
};

struct ListRequest {
  std::string prefix;
  std::string delimiter;           // "/" lists one level; empty lists recursively
  std::string continuation_token;  // from the previous page
  int max_keys = 1000;
};

struct ListPage {
  std::vector<ObjectInfo> objects;
  std::vector<std::string> common_prefixes;  // each ends with the delimiter
  std::string next_token;                    // non-empty while truncated
  bool truncated = false;
};

struct ListResult {
  std::vector<ObjectInfo> objects;           // sorted by key, no duplicates
  std::vector<std::string> common_prefixes;  // sorted, no duplicates
};

struct ReadOptions : IoOptions {
  std::string if_match;  // when set, fail with kPreconditionFailed unless the ETag matches
  // The size of the version named by if_match, when the caller knows it (0: unknown). A store that
  // reads by blocks (the cluster client) needs it to name a block; S3 ignores it.
  uint64_t object_size = 0;
};

// What a read reply said besides its bytes: the version they came from, as far as the store told.
struct ReadReply {
  static constexpr uint64_t kUnknownSize = UINT64_MAX;

  size_t bytes = 0;                     // read into the buffers; short only at the end
  std::string etag;                     // of the version read; empty when the reply named none
  uint64_t object_size = kUnknownSize;  // the version's total size, when the reply said it
};

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  // "s3://bucket", "file:///data": names the store in messages.
  virtual std::string Describe() const = 0;

  virtual Result<ListPage> List(const ListRequest& request, const IoOptions& options) = 0;
  virtual Result<ObjectInfo> Head(std::string_view key, const IoOptions& options) = 0;

  // Reads up to buf.size() bytes of `key` starting at `offset` into buf. Returns the count read,
  // which is short only at the end of the object (0 when offset >= size). A reply of another
  // version than options name is kPreconditionFailed (see CheckReadVersion); buf then holds
  // bytes that must not be used.
  Result<size_t> Read(std::string_view key, uint64_t offset, std::span<char> buf,
                      const ReadOptions& options);

  // Reads consecutive bytes of `key` from `offset` into the buffers in order, as one request where
  // the store can (S3: one ranged GET), so that neighbouring blocks cost one round trip. Returns
  // the total read, short only at the end of the object; versions are checked as by Read.
  Result<size_t> ReadV(std::string_view key, uint64_t offset, std::span<const std::span<char>> bufs,
                       const ReadOptions& options);

  // The store's own reply to a read into `bufs`, its version not yet checked: what stores
  // implement and wrappers forward. Callers use Read or ReadV.
  virtual Result<ReadReply> ReadRaw(std::string_view key, uint64_t offset,
                                    std::span<const std::span<char>> bufs,
                                    const ReadOptions& options) = 0;

  // The write path (Put, multipart upload, Delete) lands here in a later version; stores that
  // cannot write keep these defaults.
  virtual Status Put(std::string_view key, std::span<const char> data, const IoOptions& options);
  virtual Status Delete(std::string_view key, const IoOptions& options);
};

// Wraps another store: every call goes through to it, so a wrapper overrides only what it changes.
// Shares ownership of the wrapped store.
class ObjectStoreWrapper : public ObjectStore {
 public:
  explicit ObjectStoreWrapper(std::shared_ptr<ObjectStore> inner) : inner_(std::move(inner)) {}

  std::string Describe() const override { return inner_->Describe(); }
  Result<ListPage> List(const ListRequest& request, const IoOptions& options) override {
    return inner_->List(request, options);
  }
  Result<ObjectInfo> Head(std::string_view key, const IoOptions& options) override {
    return inner_->Head(key, options);
  }
  Result<ReadReply> ReadRaw(std::string_view key, uint64_t offset,
                            std::span<const std::span<char>> bufs,
                            const ReadOptions& options) override {
    return inner_->ReadRaw(key, offset, bufs, options);
  }
  Status Put(std::string_view key, std::span<const char> data, const IoOptions& options) override {
    return inner_->Put(key, data, options);
  }
  Status Delete(std::string_view key, const IoOptions& options) override {
    return inner_->Delete(key, options);
  }

 protected:
  ObjectStore& inner() const { return *inner_; }

 private:
  const std::shared_ptr<ObjectStore> inner_;
};

// OK when `reply` may be of the version `options` name: the same ETag and total size where both
// sides know them. Otherwise kPreconditionFailed naming `store`/`key` and both versions.
Status CheckReadVersion(const ObjectStore& store, std::string_view key, const ReadOptions& options,
                        const ReadReply& reply);

// Lists every page of `prefix`, merging pages and dropping duplicates (some servers repeat common
// prefixes across pages).
Result<ListResult> ListAll(ObjectStore& store, std::string_view prefix, std::string_view delimiter,
                           const IoOptions& options);

}  // namespace lakecache
