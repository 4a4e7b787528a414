#include "support/resident.h"

#include <cctype>
#include <fstream>
#include <string>

namespace lakecache::testing {

size_t MappedResidentKib(const std::function<bool(std::string_view path)>& names) {
  std::ifstream smaps("/proc/self/smaps");
  size_t kib = 0;
  bool named = false;
  for (std::string line; std::getline(smaps, line);) {
    // A map's first line is "start-end perms offset dev inode [path]", then "Key: value" lines.
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
        line.find('-') < line.find(' ')) {
      size_t path = line.find('/');
      named = path != std::string::npos && names(std::string_view(line).substr(path));
    } else if (named && line.starts_with("Rss:")) {
      kib += std::stoul(line.substr(4));
    }
  }
  return kib;
}

}  // namespace lakecache::testing
