// ScopedFd: owns one file descriptor and closes it when it goes, so that no early return leaks
// one. Movable, not copyable; -1 is "none". Not thread-safe (one owner at a time).
#pragma once

#include <unistd.h>

#include <utility>

namespace lakecache {

class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() { reset(); }
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.release()) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives the descriptor up without closing it.
  int release() { return std::exchange(fd_, -1); }
  // Closes the one held (if any) and holds `fd`.
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  // Closes now and returns close's result, for a caller that must see a deferred write error.
  int Close() { return fd_ >= 0 ? ::close(release()) : 0; }

 private:
  int fd_ = -1;
};

}  // namespace lakecache
