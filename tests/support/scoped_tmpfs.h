// ScopedTmpfs: a small file system for a test that must fill one (a disk full): a tmpfs of a given
// size mounted on a folder for the life of the object. Needs root (CAP_SYS_ADMIN), as in CI.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace lakecache::testing {

class ScopedTmpfs {
 public:
  ScopedTmpfs(const std::string& dir, uint64_t bytes);
  ~ScopedTmpfs();
  ScopedTmpfs(const ScopedTmpfs&) = delete;
  ScopedTmpfs& operator=(const ScopedTmpfs&) = delete;

  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }

 private:
  std::string dir_;
  bool mounted_ = false;
  std::string error_;
};

}  // namespace lakecache::testing

#define ASSERT_MOUNTED(tmpfs)                                                             \
  ASSERT_TRUE((tmpfs).mounted()) << "cannot mount a tmpfs (" << (tmpfs).error()           \
                                 << "): this test needs root (CAP_SYS_ADMIN) to build a " \
                                    "small file system; run it as root, as CI does"
