// Splits the mount command's `-o` values into config overrides ("dotted.key=value") and mount
// options ("allow_other", "uid=N,gid=N", "file_mode=0444,dir_mode=0555", "default_permissions",
// "ro"; see kMountOptions in mount_options.cc).
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "fs/file_system.h"
#include "fuse/fuse_mount.h"

namespace lakecache::cli {

struct MountOptions {
  std::vector<std::string> config_overrides;
  FileSystemOptions fs;  // uid, gid and modes (defaults: the mounting user, 0444 / 0555)
  FuseMountOptions fuse;
  // The descriptors of a held connection, the FUSE threads shared out among them: parallel reads
  // need several; a metadata walk is served best by few threads (the kernel hands each request to
  // the thread that has waited longest). docs/benchmarks.md measures 4 against others.
  int fuse_descriptors = 4;
  uint64_t single_put_max = 0;         // MountSpec::single_put_max
  uint32_t upload_parts_per_step = 0;  // MountSpec::upload_parts_per_step
};

Result<MountOptions> ParseMountOptions(const std::vector<std::string>& values);

// Every mount option with what it does, one per line, for `mount --help`.
std::string MountOptionsHelp();

}  // namespace lakecache::cli
