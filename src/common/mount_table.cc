#include "common/mount_table.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "common/text_codec.h"

namespace lakecache {
namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
constexpr TextCodec kMountInfoCodec = TextCodec::Octal(" \t\n");

}  // namespace

std::vector<MountEntry> ParseMountInfo(std::string_view text) {
  std::vector<MountEntry> out;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    size_t dash = 0;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (f.size() < 5 || dash + 2 >= f.size()) continue;
    out.push_back(
        {kMountInfoCodec.Unescape(f[4]), f[dash + 1], kMountInfoCodec.Unescape(f[dash + 2]), f[2]});
  }
  return out;
}

std::vector<MountEntry> ReadMountTable() {
  std::ifstream in("/proc/self/mountinfo");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return ParseMountInfo(text);
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

}  // namespace lakecache
