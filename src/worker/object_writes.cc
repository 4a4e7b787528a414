#include "worker/object_writes.h"

#include <sys/mman.h>

#include <cstring>
#include <memory>

namespace lakecache {
namespace {

constexpr auto kCallTimeout = std::chrono::minutes(5);
// How long a body waits for room in the budget before the worker says it is busy (the mount then
// asks the next worker, or retries).
constexpr auto kBudgetWait = std::chrono::seconds(30);

rpc::WrittenObject ToWritten(const ObjectInfo& info) {
  rpc::WrittenObject out;
  out.set_etag(info.etag);
  out.set_size(info.size);
  out.set_mtime(info.mtime);
  return out;
}

// A body's bytes, mapped for it and unmapped after (not malloc: see ObjectUpload).
class BodyBuffer {
 public:
  explicit BodyBuffer(uint64_t size) : size_(size) {
    if (size_ == 0) return;
    void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data_ = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
  }
  ~BodyBuffer() {
    if (data_ != nullptr) ::munmap(data_, size_);
  }
  BodyBuffer(const BodyBuffer&) = delete;
  BodyBuffer& operator=(const BodyBuffer&) = delete;
  bool ok() const { return size_ == 0 || data_ != nullptr; }
  char* data() { return data_; }

 private:
  uint64_t size_;
  char* data_ = nullptr;
};

}  // namespace

Result<Namespace*> ObjectWrites::Writable(const std::string& name, const std::string& key,
                                          bool whole_namespace) const {
  LC_ASSIGN_OR_RETURN(Namespace * ns, namespaces_->Get(name));
  if (!ns->config.write) {
    return Status::Refused(
        EROFS, "namespace '" + name + "' is read-only (namespaces." + name + ".write: false)");
  }
  bool inside = key.starts_with(ns->prefix) && (key.size() > ns->prefix.size() || whole_namespace);
  if (!inside) {
    return Status::InvalidArgument("key '" + key + "' is outside namespace '" + name + "'");
  }
  return ns;
}

Result<rpc::WrittenObject> ObjectWrites::Body(
    const rpc::WriteBodyChunk& first, const std::function<bool(rpc::WriteBodyChunk*)>& next) {
  LC_ASSIGN_OR_RETURN(Namespace * ns, Writable(first.ns(), first.key()));
  const uint64_t size = first.size();
  if (size > kMaxPartSize || size > budget_.capacity()) {
    return Status::InvalidArgument(first.key() + ": a body of " + std::to_string(size) +
                                   " bytes is more than this worker takes at once (" +
                                   std::to_string(budget_.capacity()) + ")");
  }
  if (!budget_.AcquireUntil(size, std::chrono::steady_clock::now() + kBudgetWait)) {
    return Status::Unavailable("busy: this worker's write budget (" +
                               std::to_string(budget_.capacity()) + " bytes) is in use");
  }
  struct Release {
    WriteBudget* budget;
    uint64_t bytes;
    ~Release() { budget->Release(bytes); }
  } release{&budget_, size};
  BodyBuffer body(size);
  if (!body.ok()) return Status::IoError("cannot map memory for a body");
  uint64_t got = 0;
  rpc::WriteBodyChunk chunk = first;
  do {
    if (chunk.data().size() > size - got) {
      return Status::InvalidArgument(first.key() + ": more bytes than the body's size");
    }
    // An empty body has no buffer: memcpy to a null pointer is undefined even for 0 bytes.
    if (!chunk.data().empty())
      std::memcpy(body.data() + got, chunk.data().data(), chunk.data().size());
    got += chunk.data().size();
  } while (next(&chunk));
  if (got != size) {
    return Status::Unavailable(first.key() + ": the body ended after " + std::to_string(got) +
                               " of " + std::to_string(size) + " bytes");
  }
  std::span<const char> bytes(body.data(), size);
  if (first.upload_id().empty()) {
    PutOptions options;
    options.deadline = Clock::now() + kCallTimeout;
    LC_ASSIGN_OR_RETURN(ObjectInfo put, ns->store->Put(first.key(), bytes, options));
    return ToWritten(put);
  }
  LC_ASSIGN_OR_RETURN(std::string etag,
                      ns->store->UploadPart(first.key(), first.upload_id(), first.part_number(),
                                            bytes, IoOptions::WithTimeout(kCallTimeout)));
  rpc::WrittenObject out;
  out.set_etag(etag);
  out.set_size(size);
  return out;
}

Result<rpc::WriteCallResponse> ObjectWrites::Call(const rpc::WriteCallRequest& request) {
  LC_ASSIGN_OR_RETURN(
      Namespace * ns,
      Writable(request.ns(), request.key(), request.op() == rpc::WriteCallRequest::LIST_UPLOADS));
  ObjectStore& store = *ns->store;
  IoOptions io = IoOptions::WithTimeout(kCallTimeout);
  rpc::WriteCallResponse out;
  switch (request.op()) {
    case rpc::WriteCallRequest::CREATE_UPLOAD: {
      LC_ASSIGN_OR_RETURN(std::string id, store.CreateMultipartUpload(request.key(), io));
      out.set_upload_id(id);
      return out;
    }
    case rpc::WriteCallRequest::COMPLETE_UPLOAD: {
      std::vector<CompletedPart> parts;
      for (const rpc::UploadPartEntry& p : request.parts()) {
        parts.push_back({p.number(), p.etag(), p.size()});
      }
      LC_ASSIGN_OR_RETURN(ObjectInfo done, store.CompleteMultipartUpload(
                                               request.key(), request.upload_id(), parts, io));
      *out.mutable_object() = ToWritten(done);
      return out;
    }
    case rpc::WriteCallRequest::ABORT_UPLOAD:
      LC_RETURN_IF_ERROR(store.AbortMultipartUpload(request.key(), request.upload_id(), io));
      return out;
    case rpc::WriteCallRequest::DELETE:
      if (!request.key().ends_with('/') && !ns->config.allow_delete) {
        return Status::Refused(EPERM, request.key() + ": removing an object needs namespaces." +
                                          ns->name + ".allow_delete: true");
      }
      LC_RETURN_IF_ERROR(store.Delete(request.key(), io));
      return out;
    case rpc::WriteCallRequest::COPY: {
      LC_RETURN_IF_ERROR(Writable(request.ns(), request.to_key()).status());
      LC_ASSIGN_OR_RETURN(ObjectInfo copied, store.Copy(request.key(), request.to_key(), io));
      *out.mutable_object() = ToWritten(copied);
      return out;
    }
    case rpc::WriteCallRequest::HEAD: {
      LC_ASSIGN_OR_RETURN(ObjectInfo head, store.Head(request.key(), io));
      *out.mutable_object() = ToWritten(head);
      return out;
    }
    case rpc::WriteCallRequest::LIST_UPLOADS: {
      LC_ASSIGN_OR_RETURN(std::vector<PendingUpload> pending,
                          store.ListMultipartUploads(request.key(), io));
      for (const PendingUpload& p : pending) {
        rpc::PendingUploadEntry* e = out.add_uploads();
        e->set_key(p.key);
        e->set_upload_id(p.upload_id);
        e->set_initiated(p.initiated);
      }
      return out;
    }
    default:
      return Status::InvalidArgument("unknown write call " + std::to_string(request.op()));
  }
}

}  // namespace lakecache
