// The file systems mounted where this process can see them (/proc/self/mountinfo): the one parser
// of it, for whatever must tell a lakecache mount from a folder or another file system (admin
// commands find the mount a path is in, `mount` spots a stale mount, `umount` refuses what is not
// ours, the FUSE adapter finds its mount's device). Reads the file on each call; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lakecache {

// What /proc/mounts shows as the type of a lakecache mount (FUSE subtype "lakecache").
inline constexpr char kLakecacheFsType[] = "fuse.lakecache";

struct MountEntry {
  std::string mountpoint;  // unescaped
  std::string type;        // "fuse.lakecache", "ext4", ...
  std::string source;  // unescaped; a lakecache mount's: "lakecache:URI", "lakecache:cluster:ADDR"
  std::string device;  // MAJOR:MINOR
};

// The entries of mountinfo text, in its order (the last of a mountpoint is the newest); lines
// that are not entries are skipped.
std::vector<MountEntry> ParseMountInfo(std::string_view text);
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

}  // namespace lakecache
