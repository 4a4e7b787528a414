// ObjectUpload: the bytes of one file written through the mount, streamed to its object.
//
// Bytes come in order (Append). A file that ends within its first part is one Put at Commit; a
// larger one becomes a multipart upload as soon as its first part is full, each part uploaded on
// the shared pool while the writer fills the next, at most `parts_in_flight` at once. Parts start
// at `first_part_size` and double every `parts_per_step` parts up to `max_part_size`, so memory
// stays within (parts_in_flight + 1) x max_part_size per file whatever the object's size. Part
// buffers are taken from the WriteBudget as they fill (1 MiB at a time) and given back when the
// part is uploaded; when the budget is used up, a part already as large as S3's minimum is cut
// there and uploaded, so writers wait only for parts in flight (a writer with less waits for
// others: more than write_budget / 5 MiB files at once, each with less than 5 MiB in memory,
// would wait for one another); their memory is mapped and unmapped here (not malloc: freed parts
// would stay in the arenas of the threads that made them).
//
// Failures stick: once a part, the Put or the completion fails, every later call returns that
// error and Abort drops the upload (the registry retries the abort until the store answers).
// Nothing shows at the key before Commit succeeds. Thread-compatible: one caller at a time (the
// file's lock); the pool's uploads synchronize with it internally.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/thread_pool.h"
#include "common/write_budget.h"
#include "fs/upload_registry.h"
#include "ufs/object_store.h"

namespace lakecache {

struct UploadOptions {
  uint64_t first_part_size = 8ull << 20;
  uint64_t max_part_size = 51ull << 20;
  uint32_t parts_in_flight = 4;
  int parts_per_step = 1000;  // parts of one size before the size doubles
  Clock::duration part_timeout = std::chrono::minutes(5);  // one part, retries included
  // Files up to this size that are staged on disk are kept only in their stage and sent as one
  // Put at the commit (see FileWriter); 0: every file streams in parts as it is written.
  uint64_t single_put_max = 0;
};

// The part sizes for a file of at most `write_per_file` bytes in memory: parts capped at
// write_per_file / (parts_in_flight + 1), rounded down to a MiB, starting at 8 MiB (or the cap).
UploadOptions UploadOptionsFor(uint64_t write_per_file, uint32_t parts_in_flight);
// The largest object `options` can upload in kMaxParts parts.
uint64_t LargestObject(const UploadOptions& options);

// Where an upload reports: counters a mount keeps across all its files.
struct UploadCounters {
  std::atomic<uint64_t> parts{0};
  std::atomic<uint64_t> part_bytes{0};
  std::atomic<uint64_t> puts{0};
  std::atomic<uint64_t> completed{0};
  std::atomic<uint64_t> failed{0};
};

class ObjectUpload {
 public:
  // `registry` records the multipart upload while it is open (and aborts it); `ns` names the
  // namespace there. `store`, `budget`, `pool`, `registry` and `counters` outlive this.
  ObjectUpload(std::shared_ptr<ObjectStore> store, std::string ns, std::string key,
               UploadOptions options, WriteBudget* budget, ThreadPool* pool,
               UploadRegistry* registry, UploadCounters* counters);
  // Aborts an upload neither committed nor aborted.
  ~ObjectUpload();

  // Adds `data` after the bytes written so far; may wait for the budget or for a part slot.
  Status Append(std::span<const char> data);
  // Uploads every byte written so far (the part being filled too) and waits for it: a file
  // fsynced is in the store, not yet visible. Returns the first error of the upload.
  Status Flush();
  // Makes the object (one Put, or the multipart completion) and returns its version.
  Result<ObjectInfo> Commit();
  // Makes the object from `bytes`, the whole file, as one Put (nothing was appended).
  Result<ObjectInfo> CommitWhole(std::span<const char> bytes);
  // Drops what was uploaded. Idempotent.
  void Abort();

  uint64_t size() const { return size_; }
  const UploadOptions& options() const { return options_; }
  const std::string& key() const { return key_; }

 private:
  struct Part;
  // Starts a multipart upload if none is open yet.
  Status EnsureMultipart();
  // Sends the part being filled to the pool. A full part, or one `cut` short (the budget is used
  // up), is done: the next bytes start the next part; otherwise (a flush) it keeps filling.
  Status SubmitFilling(bool cut = false);
  // The part size for part `number`.
  uint64_t PartSize(int number) const;
  // Waits until fewer than `limit` parts are in flight; returns the first error seen.
  Status WaitInFlight(uint32_t limit);
  void UploadOnPool(std::shared_ptr<Part> part, uint64_t bytes);
  Status FirstError();

  const std::shared_ptr<ObjectStore> store_;
  const std::string ns_;
  const std::string key_;
  const UploadOptions options_;
  WriteBudget* const budget_;
  ThreadPool* const pool_;
  UploadRegistry* const registry_;
  UploadCounters* const counters_;

  uint64_t size_ = 0;
  std::shared_ptr<Part> filling_;  // the part being written into, or null
  int next_part_ = 1;              // the number of filling_ (or of the next part)
  std::string upload_id_;          // empty until the multipart upload exists
  bool done_ = false;              // committed or aborted

  std::mutex mu_;  // guards what the pool's uploads report
  std::condition_variable cv_;
  uint32_t in_flight_ = 0;
  std::vector<CompletedPart> parts_;  // by part number - 1
  Status error_;
};

}  // namespace lakecache
