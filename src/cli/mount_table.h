// The file systems mounted where this process can see them (/proc/self/mountinfo), for the
// commands that must tell a lakecache mount from a folder or another file system: admin commands
// find the mount a path is in, `mount` spots a stale mount, `umount` refuses what is not ours.
#pragma once

#include <string>
#include <vector>

namespace lakecache::cli {

// What /proc/mounts shows as the type of a lakecache mount (FUSE subtype "lakecache").
inline constexpr char kLakecacheFsType[] = "fuse.lakecache";

struct MountEntry {
  std::string mountpoint;  // unescaped
  std::string type;        // "fuse.lakecache", "ext4", ...
  std::string source;  // unescaped; a lakecache mount's: "lakecache:URI", "lakecache:cluster:ADDR"
};

std::vector<MountEntry> ReadMountTable();

// The mountpoints of lakecache file systems.
std::vector<std::string> LakecacheMounts();

// The type of what is mounted at `path` (absolute, normalized), the last one mounted there; empty
// when nothing is.
std::string MountTypeAt(const std::string& path);

// `path` made absolute and normalized without touching it (a stale FUSE mount fails every stat,
// and one whose server is restarting makes a stat wait): the canonical form of its folder, then
// its last name.
std::string NormalizedPath(const std::string& path);

}  // namespace lakecache::cli
