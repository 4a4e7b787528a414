// MeteredStore: an ObjectStore wrapper that times every request and counts its outcome for the
// process's metrics registry:
//   lakecache_object_store_request_duration_seconds{op}   histogram, every request
//   lakecache_object_store_requests_total{op,code}         code "ok" or the error's name
//   lakecache_object_store_errors_total{op,code}           the failed ones only
//   lakecache_object_store_read_bytes_total                 bytes ranged reads received
//   lakecache_object_store_written_bytes_total              bytes puts and parts sent
// It sits below the retries, so each attempt is one request. `op` is one of list, head, read,
// put, delete, copy, create_upload, upload_part, complete_upload, abort_upload, list_uploads;
// `code` is a status code's name in snake case (not_found, unavailable, ...): bounded sets.
#pragma once

#include <array>
#include <memory>

#include "common/metrics.h"
#include "ufs/object_store.h"

namespace lakecache {

class MeteredStore final : public ObjectStoreWrapper {
 public:
  // `registry` must outlive the store.
  MeteredStore(std::shared_ptr<ObjectStore> inner, metrics::Registry* registry);

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

  enum Op : size_t {
    kList,
    kHead,
    kRead,
    kPut,
    kDelete,
    kCopy,
    kCreateUpload,
    kUploadPart,
    kCompleteUpload,
    kAbortUpload,
    kListUploads,
    kOpCount
  };

 private:
  struct OpCells {
    metrics::Histogram duration;
    metrics::Counter ok;
  };
  // Records one request of `op` that took since `start_ns` and ended with `status`.
  void Record(Op op, int64_t start_ns, const Status& status);

  metrics::Registry* registry_;
  std::array<OpCells, kOpCount> ops_;
  metrics::Counter read_bytes_, written_bytes_;
};

}  // namespace lakecache
