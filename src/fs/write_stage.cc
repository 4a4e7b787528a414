#include "fs/write_stage.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

namespace lakecache {
namespace {

constexpr uint64_t kTakeStep = 8ull << 20;  // the allowance is taken this much at a time

}  // namespace

bool StageAllowance::Take(uint64_t bytes) {
  int64_t want = static_cast<int64_t>(bytes);
  if (left_.fetch_sub(want) >= want) return true;
  left_.fetch_add(want);
  return false;
}

std::unique_ptr<WriteStage> WriteStage::Open(const std::string& dir, StageAllowance* allowance) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
      spdlog::warn("{}: cannot stage written files here ({}): they are read back from the store",
                   dir, std::strerror(errno));
    }
    return nullptr;
  }
  return std::unique_ptr<WriteStage>(new WriteStage(fd, allowance));
}

WriteStage::~WriteStage() { Drop(); }

void WriteStage::Drop() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  allowance_->Give(taken_);
  taken_ = 0;
}

bool WriteStage::Append(std::span<const char> data) {
  if (fd_ < 0) return false;
  while (size_ + data.size() > taken_) {
    if (!allowance_->Take(kTakeStep)) {
      Drop();
      return false;
    }
    taken_ += kTakeStep;
  }
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n =
        ::pwrite(fd_, data.data() + done, data.size() - done, static_cast<off_t>(size_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      spdlog::warn("a written file's stage failed ({}): it is read back from the store",
                   n < 0 ? std::strerror(errno) : "short write");
      Drop();
      return false;
    }
    done += static_cast<size_t>(n);
  }
  size_ += data.size();
  return true;
}

Result<size_t> WriteStage::Read(uint64_t offset, std::span<char> dst) const {
  if (fd_ < 0) return Status::IoError("the stage was dropped");
  size_t done = 0;
  while (done < dst.size() && offset + done < size_) {
    ssize_t n = ::pread(fd_, dst.data() + done,
                        std::min<uint64_t>(dst.size() - done, size_ - offset - done),
                        static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::IoError(std::string("reading a stage: ") + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  return done;
}

}  // namespace lakecache
