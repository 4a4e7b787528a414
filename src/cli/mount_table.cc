#include "cli/mount_table.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace lakecache::cli {
namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    bool octal = field[i] == '\\' && i + 3 < field.size();
    for (size_t k = 1; octal && k <= 3; ++k) octal = field[i + k] >= '0' && field[i + k] <= '7';
    if (octal) {
      out.push_back(static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                                      (field[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(field[i]);
    }
  }
  return out;
}

}  // namespace

std::vector<MountEntry> ReadMountTable() {
  std::vector<MountEntry> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    size_t dash = 0;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (f.size() < 5 || dash + 2 >= f.size()) continue;
    out.push_back({Unescape(f[4]), f[dash + 1], Unescape(f[dash + 2])});
  }
  return out;
}

std::vector<std::string> LakecacheMounts() {
  std::vector<std::string> out;
  for (const MountEntry& m : ReadMountTable()) {
    if (m.type == kLakecacheFsType) out.push_back(m.mountpoint);
  }
  return out;
}

std::string MountTypeAt(const std::string& path) {
  std::string type;
  for (const MountEntry& m : ReadMountTable()) {
    if (m.mountpoint == path) type = m.type;
  }
  return type;
}

std::string NormalizedPath(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path abs = fs::absolute(path, ec);
  if (ec) return path;
  abs = abs.lexically_normal();
  if (!abs.has_filename()) abs = abs.parent_path();
  // The folder it is in, resolved; never the path itself, which may be a mount whose server is
  // restarting (a stat would wait for it) or dead.
  fs::path parent = fs::weakly_canonical(abs.parent_path(), ec);
  std::string p = (ec ? abs : parent / abs.filename()).string();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

}  // namespace lakecache::cli
