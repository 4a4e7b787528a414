#include "support/fuse_mounts.h"

#include <fstream>
#include <sstream>

#include "support/process.h"

namespace lakecache::testing {
namespace {

// /proc/mounts escapes ' ', '\t', '\n' and '\\' as \ooo.
std::string UnescapeMountField(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      out += static_cast<char>(std::stoi(field.substr(i + 1, 3), nullptr, 8));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

}  // namespace

bool IsMounted(const std::string& path) {
  std::ifstream mounts("/proc/mounts");
  std::string line;
  while (std::getline(mounts, line)) {
    std::istringstream fields(line);
    std::string device, mountpoint;
    fields >> device >> mountpoint;
    if (UnescapeMountField(mountpoint) == path) return true;
  }
  return false;
}

Status UnmountForTest(const std::string& path) {
  if (!IsMounted(path)) return Status::Ok();
  RunResult r = RunCommand({LAKECACHE_BINARY, "umount", path}, {}, std::chrono::seconds(20));
  if (!IsMounted(path)) return Status::Ok();
  RunCommand({"fusermount3", "-u", "-z", path}, {}, std::chrono::seconds(20));
  return Status::Internal("lakecache umount " + path + " left it mounted: " + r.err);
}

}  // namespace lakecache::testing
