#include "ufs/metered_store.h"

#include <cctype>
#include <chrono>

namespace lakecache {
namespace {

constexpr std::array<const char*, MeteredStore::kOpCount> kOpNames = {
    "list",          "head",        "read",
    "put",           "delete",      "copy",
    "create_upload", "upload_part", "complete_upload",
    "abort_upload",  "list_uploads"};

constexpr char kRequests[] = "lakecache_object_store_requests_total";
constexpr char kRequestsHelp[] = "Object-store requests by operation and outcome (ok or the error)";
constexpr char kErrors[] = "lakecache_object_store_errors_total";
constexpr char kErrorsHelp[] = "Object-store requests that failed, by operation and error";

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// "NotFound" -> "not_found".
std::string SnakeCase(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (std::isupper(static_cast<unsigned char>(c))) {
      if (!out.empty()) out += '_';
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

MeteredStore::MeteredStore(std::shared_ptr<ObjectStore> inner, metrics::Registry* registry)
    : ObjectStoreWrapper(std::move(inner)), registry_(registry) {
  for (size_t i = 0; i < kOpCount; ++i) {
    metrics::Labels op = {{"op", kOpNames[i]}};
    ops_[i].duration =
        registry_->GetHistogram("lakecache_object_store_request_duration_seconds",
                                "Object-store request duration by operation (each attempt)", op);
    metrics::Labels ok = op;
    ok.emplace_back("code", "ok");
    ops_[i].ok = registry_->GetCounter(kRequests, kRequestsHelp, ok);
  }
  registry_->DeclareCounter(kErrors, kErrorsHelp);
  read_bytes_ = registry_->GetCounter("lakecache_object_store_read_bytes_total",
                                      "Bytes received from the object store by ranged reads");
  written_bytes_ = registry_->GetCounter("lakecache_object_store_written_bytes_total",
                                         "Bytes sent to the object store by puts and parts");
}

void MeteredStore::Record(Op op, int64_t start_ns, const Status& status) {
  ops_[op].duration.Observe(static_cast<double>(NowNs() - start_ns) / 1e9);
  if (status.ok()) {
    ops_[op].ok.Add();
    return;
  }
  metrics::Labels labels = {{"op", kOpNames[op]},
                            {"code", SnakeCase(StatusCodeName(status.code()))}};
  registry_->GetCounter(kRequests, kRequestsHelp, labels).Add();
  registry_->GetCounter(kErrors, kErrorsHelp, labels).Add();
}

Result<ListPage> MeteredStore::List(const ListRequest& request, const IoOptions& options) {
  int64_t start = NowNs();
  auto r = inner().List(request, options);
  Record(kList, start, r.status());
  return r;
}

Result<ObjectInfo> MeteredStore::Head(std::string_view key, const IoOptions& options) {
  int64_t start = NowNs();
  auto r = inner().Head(key, options);
  Record(kHead, start, r.status());
  return r;
}

Result<ReadReply> MeteredStore::ReadRaw(std::string_view key, uint64_t offset,
                                        std::span<const std::span<char>> bufs,
                                        const ReadOptions& options) {
  int64_t start = NowNs();
  auto r = inner().ReadRaw(key, offset, bufs, options);
  Record(kRead, start, r.status());
  if (r.ok()) read_bytes_.Add(static_cast<double>(r->bytes));
  return r;
}

Result<ObjectInfo> MeteredStore::Put(std::string_view key, std::span<const char> data,
                                     const PutOptions& options) {
  int64_t start = NowNs();
  auto r = inner().Put(key, data, options);
  Record(kPut, start, r.status());
  if (r.ok()) written_bytes_.Add(static_cast<double>(data.size()));
  return r;
}

Status MeteredStore::Delete(std::string_view key, const IoOptions& options) {
  int64_t start = NowNs();
  Status s = inner().Delete(key, options);
  Record(kDelete, start, s);
  return s;
}

Result<ObjectInfo> MeteredStore::Copy(std::string_view from_key, std::string_view to_key,
                                      const IoOptions& options) {
  int64_t start = NowNs();
  auto r = inner().Copy(from_key, to_key, options);
  Record(kCopy, start, r.status());
  return r;
}

Result<std::string> MeteredStore::CreateMultipartUpload(std::string_view key,
                                                        const IoOptions& options) {
  int64_t start = NowNs();
  auto r = inner().CreateMultipartUpload(key, options);
  Record(kCreateUpload, start, r.status());
  return r;
}

Result<std::string> MeteredStore::UploadPart(std::string_view key, std::string_view upload_id,
                                             int part_number, std::span<const char> data,
                                             const IoOptions& options) {
  int64_t start = NowNs();
  auto r = inner().UploadPart(key, upload_id, part_number, data, options);
  Record(kUploadPart, start, r.status());
  if (r.ok()) written_bytes_.Add(static_cast<double>(data.size()));
  return r;
}

Result<ObjectInfo> MeteredStore::CompleteMultipartUpload(std::string_view key,
                                                         std::string_view upload_id,
                                                         const std::vector<CompletedPart>& parts,
                                                         const IoOptions& options) {
  int64_t start = NowNs();
  auto r = inner().CompleteMultipartUpload(key, upload_id, parts, options);
  Record(kCompleteUpload, start, r.status());
  return r;
}

Status MeteredStore::AbortMultipartUpload(std::string_view key, std::string_view upload_id,
                                          const IoOptions& options) {
  int64_t start = NowNs();
  Status s = inner().AbortMultipartUpload(key, upload_id, options);
  Record(kAbortUpload, start, s);
  return s;
}

Result<std::vector<PendingUpload>> MeteredStore::ListMultipartUploads(std::string_view prefix,
                                                                      const IoOptions& options) {
  int64_t start = NowNs();
  auto r = inner().ListMultipartUploads(prefix, options);
  Record(kListUploads, start, r.status());
  return r;
}

}  // namespace lakecache
