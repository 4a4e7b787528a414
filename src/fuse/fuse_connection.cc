#define FUSE_USE_VERSION 312
#include "fuse/fuse_connection.h"

#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstring>

namespace lakecache {

Result<std::unique_ptr<FuseConnection>> FuseConnection::Mount(const std::string& mountpoint,
                                                              const FuseMountOptions& options) {
  return Mount(mountpoint, FuseMountOptionString(options));
}

Result<std::unique_ptr<FuseConnection>> FuseConnection::Mount(const std::string& mountpoint,
                                                              const std::string& opts,
                                                              int descriptors) {
  std::unique_ptr<FuseConnection> conn(new FuseConnection());
  fuse_lowlevel_ops ops;
  std::memset(&ops, 0, sizeof(ops));  // it never reads a request
  conn->session_ = NewFuseSession(opts, ops, nullptr);
  if (conn->session_ == nullptr) {
    return Status::Internal("could not create the FUSE session (" + opts + ")");
  }
  if (fuse_session_mount(conn->session_, mountpoint.c_str()) != 0) {
    return Status::IoError("mounting at " + mountpoint +
                           " failed (is /dev/fuse available and fusermount3 installed?)");
  }
  conn->mounted_ = true;
  int fd = fuse_session_fd(conn->session_);
  int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0) ::fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC);
  // A clone is a descriptor of the same connection with a queue of its own for the requests read
  // on it; as this process keeps them all, none of those queues dies with a server.
  for (int i = 1; i < descriptors; ++i) {
    ScopedFd clone(::open("/dev/fuse", O_RDWR | O_CLOEXEC));
    if (!clone.valid()) break;
    uint32_t master = static_cast<uint32_t>(fd);
    if (::ioctl(clone.get(), FUSE_DEV_IOC_CLONE, &master) != 0) break;
    conn->clones_.push_back(std::move(clone));
  }
  return conn;
}

std::vector<int> FuseConnection::fds() const {
  std::vector<int> all = {fd()};
  for (const ScopedFd& clone : clones_) all.push_back(clone.get());
  return all;
}

FuseConnection::~FuseConnection() {
  Unmount();
  clones_.clear();
  if (session_ != nullptr) fuse_session_destroy(session_);
}

int FuseConnection::fd() const { return fuse_session_fd(session_); }

void FuseConnection::Unmount() {
  if (!mounted_) return;
  fuse_session_unmount(session_);
  mounted_ = false;
}

}  // namespace lakecache
