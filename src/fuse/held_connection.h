// HeldConnection: a mounted FUSE connection as the mount's holder keeps it (mount/mount_holder.h),
// apart from the libfuse code that mounts one (fuse_connection.h), so the holder needs no libfuse.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"

namespace lakecache {

// A mounted FUSE connection as its holder keeps it (fuse/fuse_connection.h mounts one).
// Its descriptors: the one the mount was made with, then clones of it (FUSE_DEV_IOC_CLONE), so
// that a server reads requests on several at once and none dies with it.
class HeldConnection {
 public:
  virtual ~HeldConnection() = default;
  virtual int fd() const = 0;
  virtual std::vector<int> fds() const { return {fd()}; }
  virtual void Unmount() = 0;
};
// Mounts with `options`, with `descriptors` descriptors in all (at least 1).
using MountConnection = std::function<Result<std::unique_ptr<HeldConnection>>(
    const std::string& mountpoint, const std::string& options, int descriptors)>;

}  // namespace lakecache
