#include "support/restart_readers.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace lakecache::testing {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

char RestartByte(int file, uint64_t offset) {
  return static_cast<char>((offset * 131 + file * 7 + offset / 4096) % 251);
}

std::string RestartContent(int file, uint64_t size) {
  std::string bytes(size, '\0');
  for (uint64_t i = 0; i < size; ++i) bytes[i] = RestartByte(file, i);
  return bytes;
}

std::string RestartReadStats::ToString() const {
  char line[256];
  std::snprintf(
      line, sizeof(line), "%llu reads, %llu failed, %llu EINTR, %llu wrong, longest read %.3f s",
      static_cast<unsigned long long>(reads), static_cast<unsigned long long>(failed),
      static_cast<unsigned long long>(eintr), static_cast<unsigned long long>(wrong), longest_s);
  return std::string(line) + (first_error.empty() ? "" : " (first error: " + first_error + ")");
}

double SecondsUntilServed(const std::string& path, Clock::time_point since) {
  // A request the dying server took gets EINTR from the next one (without the kernel's resend):
  // asked again, it is served.
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return -1;
  void* mem = std::aligned_alloc(4096, 4096);
  ssize_t n;
  do {
    n = ::pread(fd, mem, 4096, 0);
  } while (n < 0 && errno == EINTR);
  std::free(mem);
  ::close(fd);
  return n < 0 ? -1 : std::chrono::duration<double>(Clock::now() - since).count();
}

RestartReaders::RestartReaders(std::vector<std::string> paths, uint64_t size)
    : paths_(std::move(paths)), size_(size) {
  for (size_t r = 0; r < paths_.size(); ++r) threads_.emplace_back([this, r] { Read(r); });
}

RestartReaders::~RestartReaders() { Stop(); }

void RestartReaders::Read(int r) {
  auto fail = [&](const std::string& what) {
    ++failed_;
    std::lock_guard<std::mutex> lock(mu_);
    if (first_error_.empty()) first_error_ = what;
  };
  int fd = ::open(paths_[r].c_str(), O_RDONLY | O_DIRECT);
  if (fd < 0) {
    fail("open " + paths_[r] + ": " + std::strerror(errno));
    return;
  }
  constexpr size_t kRead = 128 << 10;
  void* mem = std::aligned_alloc(4096, kRead);
  char* buf = static_cast<char*>(mem);
  bool random = r >= 4;
  uint64_t seed = 12345 + r;
  uint64_t off = 0;
  while (!stop_) {
    if (random) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      off = (seed >> 20) % (size_ / kRead) * kRead;
    } else {
      off = (off + kRead) % size_;
    }
    auto start = Clock::now();
    ssize_t n = ::pread(fd, buf, kRead, static_cast<off_t>(off));
    int err = errno;
    int64_t us =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
    int64_t seen = longest_us_.load();
    while (us > seen && !longest_us_.compare_exchange_weak(seen, us)) continue;
    ++reads_;
    if (n < 0 && err == EINTR) {  // a failed read too, though Python would read again
      ++eintr_;
      continue;
    }
    if (n != static_cast<ssize_t>(kRead)) {
      fail(n < 0 ? std::string(std::strerror(err)) : "short read of " + std::to_string(n));
      if (n < 0 && (err == ENOTCONN || err == ECONNABORTED)) break;
      continue;
    }
    for (size_t i = 0; i < kRead; i += 509) {
      if (buf[i] != RestartByte(r, off + i)) {
        ++wrong_;
        break;
      }
    }
  }
  std::free(mem);
  ::close(fd);
}

void RestartReaders::WaitForReads(uint64_t more) {
  uint64_t target = reads_.load() + more;
  auto deadline = Clock::now() + std::chrono::seconds(30);
  while (reads_.load() < target && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

RestartReadStats RestartReaders::Stop() {
  stop_ = true;
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  RestartReadStats stats;
  stats.reads = reads_;
  stats.failed = failed_;
  stats.eintr = eintr_;
  stats.wrong = wrong_;
  stats.longest_s = longest_us_.load() / 1e6;
  std::lock_guard<std::mutex> lock(mu_);
  stats.first_error = first_error_;
  return stats;
}

}  // namespace lakecache::testing
