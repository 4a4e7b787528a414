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
};

Result<MountOptions> ParseMountOptions(const std::vector<std::string>& values);

// Every mount option with what it does, one per line, for `mount --help`.
std::string MountOptionsHelp();

}  // namespace lakecache::cli
