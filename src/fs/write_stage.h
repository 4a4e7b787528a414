// WriteStage: the bytes of a file being written, kept in an unnamed file (O_TMPFILE) in the disk
// tier's folder, so that once its upload commits they enter the block cache under the new
// object's version, and a read of the file right after it was written never goes to the store.
//
// Stages share a StageAllowance (the disk tier's capacity): a file whose stage would pass it
// drops its stage (it is then read from the store like any other), and so does one whose disk
// write fails. A stage gives its bytes back when destroyed. Thread-compatible (the file's lock).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "common/result.h"

namespace lakecache {

class StageAllowance {
 public:
  explicit StageAllowance(uint64_t bytes) : left_(static_cast<int64_t>(bytes)) {}
  bool Take(uint64_t bytes);
  void Give(uint64_t bytes) { left_.fetch_add(static_cast<int64_t>(bytes)); }

 private:
  std::atomic<int64_t> left_;
};

class WriteStage {
 public:
  // A stage in folder `dir`; null when it cannot be made (the reason is logged once).
  static std::unique_ptr<WriteStage> Open(const std::string& dir, StageAllowance* allowance);
  ~WriteStage();
  WriteStage(const WriteStage&) = delete;
  WriteStage& operator=(const WriteStage&) = delete;

  // Adds `data` at the end. False: the stage is dropped (no room, or the disk failed).
  bool Append(std::span<const char> data);
  // Reads what was staged at `offset`.
  Result<size_t> Read(uint64_t offset, std::span<char> dst) const;
  uint64_t size() const { return size_; }
  int fd() const { return fd_; }
  bool dropped() const { return fd_ < 0; }

 private:
  WriteStage(int fd, StageAllowance* allowance) : fd_(fd), allowance_(allowance) {}
  void Drop();

  int fd_;
  StageAllowance* const allowance_;
  uint64_t size_ = 0;
  uint64_t taken_ = 0;  // of the allowance
};

}  // namespace lakecache
