// FuseConnection: a mount's FUSE connection held open by a process that serves none of it, so
// that the servers reading it (FuseMount::Adopt) may die or be replaced while the mount stays.
// The kernel keeps a connection while any descriptor of it is open; requests wait for the next
// server. Mounted with FuseMountOptionString's options; the descriptor is inheritable.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/scoped_fd.h"
#include "fuse/fuse_mount.h"
#include "fuse/held_connection.h"

struct fuse_session;

namespace lakecache {

class FuseConnection : public HeldConnection {
 public:
  static Result<std::unique_ptr<FuseConnection>> Mount(const std::string& mountpoint,
                                                       const FuseMountOptions& options);
  // Mounted with an option string as FuseMountOptionString makes (what a server asks its holder),
  // with `descriptors` - 1 clones of the connection's descriptor besides it.
  static Result<std::unique_ptr<FuseConnection>> Mount(const std::string& mountpoint,
                                                       const std::string& options,
                                                       int descriptors = 1);
  ~FuseConnection() override;  // unmounts
  FuseConnection(const FuseConnection&) = delete;
  FuseConnection& operator=(const FuseConnection&) = delete;

  int fd() const override;
  std::vector<int> fds() const override;
  void Unmount() override;

 private:
  FuseConnection() = default;
  fuse_session* session_ = nullptr;
  std::vector<ScopedFd> clones_;
  bool mounted_ = false;
};

}  // namespace lakecache
