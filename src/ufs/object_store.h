// ObjectStore: the under-storage interface, what lakecache needs from S3, OSS or a local directory.
//
// Keys are relative to the store's bucket (or root folder), never starting with '/'. Every call
// takes IoOptions carrying its deadline. Errors are Status codes: kNotFound (no such key/bucket),
// kAccessDenied (403, bad credentials), kUnavailable (transient: 5xx, SlowDown, timeout, reset;
// retry), kPreconditionFailed (the object changed under If-Match); anything else is final. Messages
// name the bucket, the key and the HTTP status. Implementations are thread-safe; behaviour such as
// retries or fault injection is added by wrapping (ObjectStoreWrapper: RetryingStore,
// FaultInjectingStore), not by flags. A store that cannot write keeps the write defaults, which
// fail with kUnimplemented naming the store.
//
// Versions are exact: every read reply says which version its bytes came from (ETag, total size),
// and Read/ReadV check it against the version the caller names (ReadOptions::if_match,
// object_size). Bytes of any other version fail with kPreconditionFailed, so nothing above this
// interface can cache them under the wrong key, whether or not the server honoured If-Match.
//
// Writes follow S3: an object appears whole or not at all, by one Put or by a multipart upload
// (CreateMultipartUpload, UploadPart per part, CompleteMultipartUpload; AbortMultipartUpload
// drops it). Every body goes with its Content-MD5, so a body damaged on the way is refused.
// Which calls may be repeated after a retryable error (RetryingStore does so):
//   Put, UploadPart, Copy, Delete, AbortMultipartUpload, ListMultipartUploads: yes, a repeat
//     writes or removes the same thing again (a create-only Put: see RetryingStore).
//   CreateMultipartUpload: yes, but a lost reply leaves an unused upload behind, which
//     ListMultipartUploads finds and AbortMultipartUpload removes.
//   CompleteMultipartUpload: when its first attempt succeeded but the reply was lost, the repeat
//     finds the upload gone (kNotFound, NoSuchUpload). The repeat then counts as done only if the
//     key holds the object that upload made: the ETag MultipartEtag computes from the parts (S3,
//     Swift), or, where part ETags are no MD5s, an ETag ending in "-<part count>" and the parts'
//     total size. Anything else is the kNotFound.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
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

struct PutOptions : IoOptions {
  // Create only: sends If-None-Match: *, so that an existing key fails with kPreconditionFailed.
  // LocalStore honours it; s3rver 3.7 ignores the header and overwrites; Swift's s3api refuses
  // it (HTTP 501: kUnimplemented). s3_write_test pins both servers.
  bool if_none_match = false;
};

// S3's limits on multipart uploads.
inline constexpr uint64_t kMinPartSize = 5ull << 20;  // every part but the last
inline constexpr uint64_t kMaxPartSize = 5ull << 30;  // also the largest single Put or Copy
inline constexpr int kMaxParts = 10000;

struct CompletedPart {
  int part_number = 0;  // 1..kMaxParts, ascending in a CompleteMultipartUpload
  std::string etag;     // as UploadPart returned it, without quotes
  uint64_t size = 0;    // the part's bytes; the completed object's size is their sum
};

// A multipart upload that was created and neither completed nor aborted.
struct PendingUpload {
  std::string key;
  std::string upload_id;
  int64_t initiated = 0;  // seconds since the epoch, 0 if unknown
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

  // Writes `data` as the whole object `key`, replacing any other. Returns its ETag and size.
  virtual Result<ObjectInfo> Put(std::string_view key, std::span<const char> data,
                                 const PutOptions& options);
  // Removes `key`; a missing key is OK, as on S3.
  virtual Status Delete(std::string_view key, const IoOptions& options);
  // A server-side copy of `from_key`'s current version to `to_key`; returns the copy's ETag and
  // size. Objects above the store's single-copy limit (5 GiB on S3) are copied part by part.
  virtual Result<ObjectInfo> Copy(std::string_view from_key, std::string_view to_key,
                                  const IoOptions& options);

  // Starts a multipart upload to `key`; returns its upload id. Nothing shows at `key` until
  // CompleteMultipartUpload.
  virtual Result<std::string> CreateMultipartUpload(std::string_view key, const IoOptions& options);
  // Uploads (or replaces) part `part_number` (1..kMaxParts); returns the part's ETag.
  // REQUIRES: data.size() >= kMinPartSize unless it is the last part (S3 checks at Complete).
  virtual Result<std::string> UploadPart(std::string_view key, std::string_view upload_id,
                                         int part_number, std::span<const char> data,
                                         const IoOptions& options);
  // Joins `parts` (ascending part numbers) into the object `key`; returns its ETag and size.
  virtual Result<ObjectInfo> CompleteMultipartUpload(std::string_view key,
                                                     std::string_view upload_id,
                                                     const std::vector<CompletedPart>& parts,
                                                     const IoOptions& options);
  // Drops the upload and its parts; an upload that no longer exists is OK.
  virtual Status AbortMultipartUpload(std::string_view key, std::string_view upload_id,
                                      const IoOptions& options);
  // Every pending upload whose key starts with `prefix`, sorted by key, then by initiation.
  virtual Result<std::vector<PendingUpload>> ListMultipartUploads(std::string_view prefix,
                                                                  const IoOptions& options);

 protected:
  // What the write defaults return: kUnimplemented, "file:///x/key: store ... cannot write".
  Status CannotWrite(std::string_view key, std::string_view what) const;
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
  Result<ObjectInfo> Put(std::string_view key, std::span<const char> data,
                         const PutOptions& options) override {
    return inner_->Put(key, data, options);
  }
  Status Delete(std::string_view key, const IoOptions& options) override {
    return inner_->Delete(key, options);
  }
  Result<ObjectInfo> Copy(std::string_view from_key, std::string_view to_key,
                          const IoOptions& options) override {
    return inner_->Copy(from_key, to_key, options);
  }
  Result<std::string> CreateMultipartUpload(std::string_view key,
                                            const IoOptions& options) override {
    return inner_->CreateMultipartUpload(key, options);
  }
  Result<std::string> UploadPart(std::string_view key, std::string_view upload_id, int part_number,
                                 std::span<const char> data, const IoOptions& options) override {
    return inner_->UploadPart(key, upload_id, part_number, data, options);
  }
  Result<ObjectInfo> CompleteMultipartUpload(std::string_view key, std::string_view upload_id,
                                             const std::vector<CompletedPart>& parts,
                                             const IoOptions& options) override {
    return inner_->CompleteMultipartUpload(key, upload_id, parts, options);
  }
  Status AbortMultipartUpload(std::string_view key, std::string_view upload_id,
                              const IoOptions& options) override {
    return inner_->AbortMultipartUpload(key, upload_id, options);
  }
  Result<std::vector<PendingUpload>> ListMultipartUploads(std::string_view prefix,
                                                          const IoOptions& options) override {
    return inner_->ListMultipartUploads(prefix, options);
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

// The ETag S3 gives the object a multipart upload of `parts` makes: the MD5 of the parts' binary
// MD5s, then "-<count>". Empty when a part's ETag is no MD5 (hex, 32 digits).
std::string MultipartEtag(const std::vector<CompletedPart>& parts);

// The part count an ETag "<md5>-N" names; 0 when it has no such suffix.
int EtagPartCount(std::string_view etag);

// Whether `object` (from Head) is what completing an upload of `parts` made, by the rule in this
// file's opening comment: the MultipartEtag of the parts, or where that cannot be computed, an
// ETag naming as many parts; and in both cases their total size, when the parts give sizes.
bool IsObjectOfUpload(const ObjectInfo& object, const std::vector<CompletedPart>& parts);

// Lists every page of `prefix`, merging pages and dropping duplicates (some servers repeat common
// prefixes across pages). `options` bounds the whole listing; `page_timeout`, when given, also
// bounds each page from the moment it is asked for, so that a listing of any length goes on while
// pages keep coming and a store that stops answering fails it within that time.
Result<ListResult> ListAll(ObjectStore& store, std::string_view prefix, std::string_view delimiter,
                           const IoOptions& options,
                           Clock::duration page_timeout = Clock::duration::max());
// The same listing handed to `take` a page at a time, as pages come (duplicates not dropped).
Status ListPages(ObjectStore& store, std::string_view prefix, std::string_view delimiter,
                 const IoOptions& options, Clock::duration page_timeout,
                 const std::function<void(ListPage& page)>& take);

}  // namespace lakecache
