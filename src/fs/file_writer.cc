#include "fs/file_writer.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <fstream>

#include "meta/namespace_table.h"

namespace lakecache {

pid_t ProcessOfThread(pid_t tid) {
  std::ifstream status("/proc/" + std::to_string(tid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("Tgid:")) return static_cast<pid_t>(std::stol(line.substr(5)));
  }
  return tid;
}

FileWriter::FileWriter(Namespace* ns, std::string path, uint64_t ino, pid_t opener, bool replaces,
                       std::unique_ptr<ObjectUpload> upload, std::unique_ptr<WriteStage> stage)
    : ns_(ns),
      path_(std::move(path)),
      ino_(ino),
      opener_(opener),
      replaces_(replaces),
      upload_(std::move(upload)),
      stage_(std::move(stage)) {
  stage_only_ = stage_ != nullptr && upload_->options().single_put_max > 0;
}

Status FileWriter::StreamStaged() {
  stage_only_ = false;
  std::string chunk(1 << 20, '\0');
  for (uint64_t at = 0; at < size_;) {
    LC_ASSIGN_OR_RETURN(
        size_t n, stage_->Read(at, {chunk.data(), std::min<uint64_t>(chunk.size(), size_ - at)}));
    if (n == 0) return Status::IoError(ns_->name + "/" + path_ + ": the stage ended early");
    LC_RETURN_IF_ERROR(upload_->Append({chunk.data(), n}));
    at += n;
  }
  return Status::Ok();
}

Result<ObjectInfo> FileWriter::CommitFromStage() {
  if (size_ == 0) return upload_->CommitWhole({});
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, stage_->fd(), 0);
  if (p == MAP_FAILED) return Status::IoError(ns_->name + "/" + path_ + ": cannot map the stage");
  Result<ObjectInfo> done = upload_->CommitWhole({static_cast<const char*>(p), size_});
  ::munmap(p, size_);
  return done;
}

Status FileWriter::Refused(int err, std::string_view why) const {
  return Status::Refused(err, ns_->name + "/" + path_ + ": " + std::string(why));
}

Result<size_t> FileWriter::Write(uint64_t offset, std::span<const char> data, pid_t tid) {
  MutexLock lock(&mu_);
  if (committed_.has_value()) {
    if (!committed_->ok()) return committed_->status();  // the failure sticks
    return Refused(EBADF, "written after it was closed and committed");
  }
  if (offset != size_) {
    return Refused(EINVAL, "a write at " + std::to_string(offset) + " after " +
                               std::to_string(size_) +
                               " bytes: files are written in order only (no random writes)");
  }
  if (stage_only_ && size_ + data.size() > upload_->options().single_put_max) {
    LC_RETURN_IF_ERROR(StreamStaged());
  }
  if (stage_only_) {
    if (!stage_->Append(data)) {
      stage_only_ = false;  // its bytes are gone: the file fails
      return Status::IoError(ns_->name + "/" + path_ + ": the stage failed");
    }
  } else {
    LC_RETURN_IF_ERROR(upload_->Append(data));
    if (stage_ != nullptr && !stage_->Append(data)) stage_.reset();
  }
  size_ += data.size();
  size_flag_.store(size_, std::memory_order_release);
  if (!opener_wrote_) {
    auto [it, added] = writer_threads_.try_emplace(tid, false);
    if (added) it->second = tid == opener_ || ProcessOfThread(tid) == opener_;
    opener_wrote_ = it->second;
  }
  return data.size();
}

Result<size_t> FileWriter::Read(uint64_t offset, std::span<char> dst) {
  MutexLock lock(&mu_);
  if (stage_ == nullptr) {
    return Refused(EBADF, "open for writing; its bytes can be read once it is closed");
  }
  return stage_->Read(offset, dst);
}

Status FileWriter::Fsync() {
  MutexLock lock(&mu_);
  if (committed_.has_value()) return committed_->status();
  if (stage_only_) LC_RETURN_IF_ERROR(StreamStaged());  // fsync puts the bytes in the store
  return upload_->Flush();
}

Status FileWriter::Truncate(uint64_t size) {
  MutexLock lock(&mu_);
  if (size == size_ && !committed_.has_value()) return Status::Ok();
  return Refused(EINVAL, "truncating to " + std::to_string(size) + " bytes with " +
                             std::to_string(size_) +
                             " written: only the size written so far is allowed");
}

bool FileWriter::CommitsOnClose(pid_t tgid) const {
  MutexLock lock(&mu_);
  return tgid == opener_ && opener_wrote_ && !committed_.has_value();
}

void FileWriter::NoteClose(pid_t tgid) {
  MutexLock lock(&mu_);
  if (tgid == opener_) opener_closed_ = true;
}

bool FileWriter::YieldIfUnused() {
  MutexLock lock(&mu_);
  if (committed_.has_value() || size_ != 0 || !writer_threads_.empty() || !opener_closed_) {
    return false;
  }
  committed_ = Refused(EBADF,
                       "opened again and written by another open after this one closed "
                       "without writing: this handle no longer writes the file");
  yielded_flag_.store(true, std::memory_order_release);
  committed_flag_.store(true, std::memory_order_release);
  upload_.reset();
  stage_.reset();
  return true;
}

Result<ObjectInfo> FileWriter::Commit(
    const std::function<void(const ObjectInfo&, const WriteStage*)>& on_commit) {
  MutexLock lock(&mu_);
  if (committed_.has_value()) return *committed_;
  Result<ObjectInfo> done = stage_only_ ? CommitFromStage() : upload_->Commit();
  if (done.ok()) on_commit(*done, stage_.get());
  committed_ = done;
  committed_flag_.store(true, std::memory_order_release);
  upload_.reset();
  stage_.reset();
  return done;
}

}  // namespace lakecache
