#include "support/scoped_tmpfs.h"

#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace lakecache::testing {

ScopedTmpfs::ScopedTmpfs(const std::string& dir, uint64_t bytes) : dir_(dir) {
  std::filesystem::create_directories(dir);
  std::string options = "size=" + std::to_string(bytes);
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, options.c_str()) == 0) {
    mounted_ = true;
  } else {
    error_ = std::strerror(errno);
  }
}

ScopedTmpfs::~ScopedTmpfs() {
  if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
}

}  // namespace lakecache::testing
