// Readers that keep reading through a restart of their mount's server: four sequential and four
// random, each with its file open from start to end (O_DIRECT, so every read reaches the server),
// checking every byte against the content the files were made with. What they saw: reads,
// failures (EINTR counted apart), wrong bytes and the longest read.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace lakecache::testing {

// Byte `offset` of restart-test file `file`.
char RestartByte(int file, uint64_t offset);
// The whole content of restart-test file `file` of `size` bytes.
std::string RestartContent(int file, uint64_t size);

struct RestartReadStats {
  uint64_t reads = 0, failed = 0, eintr = 0, wrong = 0;
  double longest_s = 0;
  std::string first_error;
  std::string ToString() const;
};

// Seconds from `since` until a read of `path` returns (O_DIRECT: the server answers it): after a
// server was killed, how long the mount took to serve again (EINTR is asked again). -1 when the
// read fails.
double SecondsUntilServed(const std::string& path, std::chrono::steady_clock::time_point since);

// A read may pause for a server's restart (`restart_s`, as above) plus one read of its own, not
// for a retry or a timeout.
inline constexpr double kReadBesideARestartS = 1.0;

class RestartReaders {
 public:
  // Reads `paths[i]` (made with RestartContent(i, size)); readers 0-3 sequentially, 4-7 at random.
  RestartReaders(std::vector<std::string> paths, uint64_t size);
  ~RestartReaders();
  // Waits (at most 30 s) until `more` reads more have been done.
  void WaitForReads(uint64_t more);
  // Forgets the longest read so far (the warm-up's).
  void ResetLongest() { longest_us_ = 0; }
  RestartReadStats Stop();

 private:
  void Read(int r);

  std::vector<std::string> paths_;
  uint64_t size_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> reads_{0}, failed_{0}, eintr_{0}, wrong_{0};
  std::atomic<int64_t> longest_us_{0};
  std::mutex mu_;
  std::string first_error_;
  std::vector<std::thread> threads_;
};

}  // namespace lakecache::testing
