#include "support/test_data.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

namespace lakecache::testing {

std::string MakeBytes(uint64_t seed, size_t size) {
  std::string out(size, '\0');
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 1);
  for (size_t i = 0; i < size; i += 8) {
    uint64_t v = rng();
    std::memcpy(out.data() + i, &v, std::min<size_t>(8, size - i));
  }
  return out;
}

FileBytes ReadWholeFile(const std::string& path) {
  FileBytes out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {errno, ""};
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) out.error = errno;
    if (n <= 0) break;
    out.bytes.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace lakecache::testing
