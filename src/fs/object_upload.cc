#include "fs/object_upload.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

namespace lakecache {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kChargeStep = kMiB;  // budget is taken as a part fills, this much at a time

}  // namespace

UploadOptions UploadOptionsFor(uint64_t write_per_file, uint32_t parts_in_flight) {
  UploadOptions o;
  o.parts_in_flight = std::max<uint32_t>(parts_in_flight, 1);
  uint64_t cap = write_per_file / (o.parts_in_flight + 1) / kMiB * kMiB;
  o.max_part_size = std::clamp<uint64_t>(cap, kMinPartSize, kMaxPartSize);
  o.first_part_size = std::min<uint64_t>(8 * kMiB, o.max_part_size);
  return o;
}

uint64_t LargestObject(const UploadOptions& options) {
  uint64_t total = 0;
  for (int n = 1; n <= kMaxParts; ++n) {
    int step = (n - 1) / std::max(options.parts_per_step, 1);
    uint64_t size = step >= 40 ? options.max_part_size : options.first_part_size << step;
    total += std::min(size, options.max_part_size);
  }
  return total;
}

// One part's bytes, in memory mapped for it (pages are taken as they are written).
struct ObjectUpload::Part {
  Part(int n, uint64_t size, WriteBudget* b) : number(n), capacity(size), budget(b) {
    void* p = ::mmap(nullptr, capacity, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    data = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
  }
  ~Part() {
    if (data != nullptr) ::munmap(data, capacity);
    budget->Release(charged);
  }
  Part(const Part&) = delete;
  Part& operator=(const Part&) = delete;

  const int number;
  const uint64_t capacity;
  WriteBudget* const budget;
  char* data = nullptr;
  uint64_t filled = 0;    // bytes written into it
  uint64_t charged = 0;   // bytes of the budget it holds
  uint64_t uploaded = 0;  // bytes of it in the store as part `number` (after a flush)
};

ObjectUpload::ObjectUpload(std::shared_ptr<ObjectStore> store, std::string ns, std::string key,
                           UploadOptions options, WriteBudget* budget, ThreadPool* pool,
                           UploadRegistry* registry, UploadCounters* counters)
    : store_(std::move(store)),
      ns_(std::move(ns)),
      key_(std::move(key)),
      options_(options),
      budget_(budget),
      pool_(pool),
      registry_(registry),
      counters_(counters) {}

ObjectUpload::~ObjectUpload() { Abort(); }

uint64_t ObjectUpload::PartSize(int number) const {
  int step = (number - 1) / std::max(options_.parts_per_step, 1);
  if (step >= 40) return options_.max_part_size;
  return std::min(options_.first_part_size << step, options_.max_part_size);
}

Status ObjectUpload::FirstError() {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

Status ObjectUpload::Append(std::span<const char> data) {
  if (done_) return Status::Internal(key_ + ": written after it was committed");
  while (!data.empty()) {
    LC_RETURN_IF_ERROR(FirstError());
    if (filling_ == nullptr) {
      if (next_part_ > kMaxParts) {
        // Sticks: the bytes of this write taken so far must never become a cut-short object.
        Status too_big = Status::Refused(EFBIG, key_ + ": larger than the " +
                                                    std::to_string(LargestObject(options_) >> 20) +
                                                    " MiB an object may have with "
                                                    "client.write_per_file");
        std::lock_guard<std::mutex> lock(mu_);
        if (error_.ok()) error_ = too_big;
        return too_big;
      }
      filling_ = std::make_shared<Part>(next_part_, PartSize(next_part_), budget_);
      if (filling_->data == nullptr) {
        filling_.reset();
        Status no_memory = Status::IoError(key_ + ": cannot map memory for a part");
        std::lock_guard<std::mutex> lock(mu_);
        if (error_.ok()) error_ = no_memory;  // bytes of this write were taken: it sticks
        return no_memory;
      }
    }
    Part& p = *filling_;
    uint64_t n = std::min<uint64_t>({data.size(), p.capacity - p.filled, kChargeStep});
    uint64_t need =
        std::min(p.capacity, (p.filled + n + kChargeStep - 1) / kChargeStep * kChargeStep);
    if (need > p.charged) {
      // The budget is used up: a part that may end here (S3's minimum) goes now, so that its
      // memory comes back; what holds less waits for others' parts to be uploaded.
      if (!budget_->TryAcquire(need - p.charged)) {
        if (p.filled >= kMinPartSize) {
          LC_RETURN_IF_ERROR(SubmitFilling(/*cut=*/true));
          continue;
        }
        budget_->Acquire(need - p.charged);
      }
      p.charged = need;
    }
    std::memcpy(p.data + p.filled, data.data(), n);
    p.filled += n;
    size_ += n;
    data = data.subspan(n);
    if (p.filled == p.capacity) LC_RETURN_IF_ERROR(SubmitFilling());
  }
  return Status::Ok();
}

Status ObjectUpload::EnsureMultipart() {
  if (!upload_id_.empty()) return Status::Ok();
  Result<std::string> id =
      store_->CreateMultipartUpload(key_, IoOptions::WithTimeout(options_.part_timeout));
  if (!id.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.ok()) error_ = id.status();
    return id.status();
  }
  upload_id_ = *id;
  registry_->Add({ns_, key_, upload_id_});
  return Status::Ok();
}

Status ObjectUpload::WaitInFlight(uint32_t limit) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return in_flight_ < limit; });
  return error_;
}

Status ObjectUpload::SubmitFilling(bool cut) {
  LC_RETURN_IF_ERROR(EnsureMultipart());
  LC_RETURN_IF_ERROR(WaitInFlight(options_.parts_in_flight));
  std::shared_ptr<Part> part = filling_;
  part->uploaded = part->filled;
  if (cut || part->filled == part->capacity) {  // the next bytes go to the next part
    filling_.reset();
    ++next_part_;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++in_flight_;
  }
  uint64_t bytes = part->filled;
  pool_->Post(
      [this, part = std::move(part), bytes]() mutable { UploadOnPool(std::move(part), bytes); });
  return Status::Ok();
}

void ObjectUpload::UploadOnPool(std::shared_ptr<Part> part, uint64_t bytes) {
  Result<std::string> etag =
      store_->UploadPart(key_, upload_id_, part->number, std::span<const char>(part->data, bytes),
                         IoOptions::WithTimeout(options_.part_timeout));
  int number = part->number;
  part.reset();  // a full part's memory goes back to the budget now
  std::lock_guard<std::mutex> lock(mu_);
  if (etag.ok()) {
    if (parts_.size() < static_cast<size_t>(number)) parts_.resize(number);
    parts_[number - 1] = CompletedPart{number, *etag, bytes};
    counters_->parts.fetch_add(1, std::memory_order_relaxed);
    counters_->part_bytes.fetch_add(bytes, std::memory_order_relaxed);
  } else if (error_.ok()) {
    error_ = etag.status().WithContext("part " + std::to_string(number));
  }
  --in_flight_;
  cv_.notify_all();
}

Status ObjectUpload::Flush() {
  if (done_) return FirstError();
  LC_RETURN_IF_ERROR(FirstError());
  if (filling_ != nullptr && filling_->filled > filling_->uploaded) {
    LC_RETURN_IF_ERROR(SubmitFilling());
  }
  return WaitInFlight(1);
}

Result<ObjectInfo> ObjectUpload::CommitWhole(std::span<const char> bytes) {
  if (done_) return Status::Internal(key_ + ": committed twice");
  done_ = true;
  PutOptions put_options;
  put_options.deadline = Clock::now() + options_.part_timeout;
  Result<ObjectInfo> put = store_->Put(key_, bytes, put_options);
  (put.ok() ? counters_->puts : counters_->failed).fetch_add(1, std::memory_order_relaxed);
  return put;
}

Result<ObjectInfo> ObjectUpload::Commit() {
  if (done_) return Status::Internal(key_ + ": committed twice");
  Status failed = FirstError();
  if (failed.ok() && upload_id_.empty()) {
    std::span<const char> bytes;
    if (filling_ != nullptr) bytes = std::span<const char>(filling_->data, filling_->filled);
    Result<ObjectInfo> put = CommitWhole(bytes);
    filling_.reset();
    return put;
  }
  if (failed.ok() && filling_ != nullptr && filling_->filled > filling_->uploaded) {
    failed = SubmitFilling();
  }
  filling_.reset();
  if (failed.ok()) failed = WaitInFlight(1);
  if (!failed.ok()) {
    Abort();
    counters_->failed.fetch_add(1, std::memory_order_relaxed);
    return failed;
  }
  std::vector<CompletedPart> parts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    parts = parts_;
  }
  Result<ObjectInfo> done = store_->CompleteMultipartUpload(
      key_, upload_id_, parts, IoOptions::WithTimeout(options_.part_timeout));
  if (!done.ok()) {
    Abort();
    counters_->failed.fetch_add(1, std::memory_order_relaxed);
    return done.status();
  }
  registry_->Remove({ns_, key_, upload_id_});
  done_ = true;
  counters_->completed.fetch_add(1, std::memory_order_relaxed);
  return done;
}

void ObjectUpload::Abort() {
  if (done_) return;
  done_ = true;
  (void)WaitInFlight(1);
  filling_.reset();
  if (!upload_id_.empty()) registry_->AbortLater(store_, {ns_, key_, upload_id_});
}

}  // namespace lakecache
