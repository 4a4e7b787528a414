// FuseMount: serves a FileSystem at a mountpoint through libfuse3's low-level API.
//
// Read-only: every operation that would change the tree answers EROFS and the mount is "ro".
// Multi-threaded, reads of up to 1 MiB, readdirplus. Entry and attribute timeouts come from the
// FileSystem (the namespace's metadata TTL). Run() blocks until the file system is unmounted or the
// process gets SIGTERM/SIGINT, then unmounts. One FuseMount per process.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "client/file_system.h"
#include "common/status.h"

struct fuse_session;

namespace lakecache {

struct FuseMountOptions {
  bool allow_other = false;
  bool default_permissions = true;
  std::string fs_name = "lakecache";  // shown in /proc/mounts
  unsigned max_threads = 16;
};

class FuseMount {
 public:
  FuseMount(std::shared_ptr<FileSystem> fs, FuseMountOptions options);
  ~FuseMount();

  // Mounts at `mountpoint`. After success the mount is visible; call Run to serve it.
  Status Mount(const std::string& mountpoint);
  // Serves requests until unmounted or signalled; then unmounts.
  Status Run();

 private:
  std::shared_ptr<FileSystem> fs_;
  FuseMountOptions options_;
  fuse_session* session_ = nullptr;
  bool mounted_ = false;
};

}  // namespace lakecache
