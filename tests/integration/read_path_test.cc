// The read path of a real FUSE mount (`lakecache mount`, foreground) over s3rver: sixteen parallel
// sequential readers stay within the memory-tier capacity plus the memory budget (read-ahead
// shrinks, the bytes stay right), and a random reader fetches exactly the blocks it touches
// (nothing is prefetched for it). Fetches are counted from the "cache stats:" line the mount logs
// when it ends. Needs root and /dev/fuse. Mount checks come from support/fuse_mounts.h.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/fuse_mounts.h"
#include "support/slowdown.h"
#include "support/test_servers.h"
#include "support/wait_for.h"

// Its own namespace: the files of integration_tests are compiled in unity batches.
namespace lakecache::read_path_test {
namespace {

namespace fs = std::filesystem;
using testing::ChildProcess;
using testing::IsMounted;
using testing::RunCommand;
using testing::TempDir;
using Clock = std::chrono::steady_clock;

constexpr char kBucket[] = "readpath";
constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kBlock = 4 * kMiB;
constexpr int kReaders = 16;
constexpr uint64_t kSequentialSize = 48 * kMiB;
constexpr uint64_t kRandomSize = 64 * kMiB;
constexpr char kRandomKey[] = "random.bin";
constexpr uint64_t kRandomSeed = 1000;

std::string SequentialKey(int i) { return "seq/part-" + std::to_string(i) + ".bin"; }

// Chunk `chunk` (1 MiB) of the object of `seed`: deterministic bytes, cheap to make again.
void MakeChunk(uint64_t seed, uint64_t chunk, char* out) {
  std::mt19937_64 rng((seed * 1000003 + chunk) * 0x9E3779B97F4A7C15ull + 1);
  for (uint64_t i = 0; i < kMiB; i += 8) {
    uint64_t v = rng();
    std::memcpy(out + i, &v, 8);
  }
}

std::string MakeObject(uint64_t seed, uint64_t size) {
  std::string out(size, '\0');
  for (uint64_t c = 0; c < size / kMiB; ++c) MakeChunk(seed, c, out.data() + c * kMiB);
  return out;
}

// The peak resident set (VmHWM) of `pid` in bytes, over its life so far; 0 if it cannot be read.
uint64_t PeakRssBytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmHWM:")) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  }
  return 0;
}

// The server of the mount whose `lakecache mount` process is `holder`: its child
// (mount/mount_holder.h); 0 if none appears.
pid_t ServerOf(pid_t holder) {
  std::string children =
      "/proc/" + std::to_string(holder) + "/task/" + std::to_string(holder) + "/children";
  pid_t server = 0;
  testing::WaitFor([&] { return static_cast<bool>(std::ifstream(children) >> server); });
  return server;
}

// The number after `name=` in the mount's "cache stats:" line; -1 if absent.
long long StatOf(const std::string& log, const std::string& name) {
  size_t line = log.rfind("cache stats:");
  if (line == std::string::npos) return -1;
  size_t at = log.find(" " + name + "=", line);
  if (at == std::string::npos) return -1;
  return std::strtoll(log.c_str() + at + name.size() + 2, nullptr, 10);
}

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class ReadPathTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto started = testing::S3rver::Start({.buckets = {kBucket}});
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started).value().release();
    // In batches, to keep this process small.
    for (int first = 0; first < kReaders; first += 4) {
      std::vector<std::pair<std::string, std::string>> batch;
      for (int i = first; i < first + 4; ++i) {
        batch.push_back({SequentialKey(i), MakeObject(i, kSequentialSize)});
      }
      Status put = server_->PutObjects(kBucket, batch);
      ASSERT_TRUE(put.ok()) << put.ToString();
    }
    Status put = server_->PutObjects(kBucket, {{kRandomKey, MakeObject(kRandomSeed, kRandomSize)}});
    ASSERT_TRUE(put.ok()) << put.ToString();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    ASSERT_TRUE(::geteuid() == 0 && fs::exists("/dev/fuse")) << "needs root and /dev/fuse";
    ASSERT_NE(server_, nullptr) << "the suite's s3rver did not start or take the objects";
    scratch_ = std::make_unique<TempDir>("lakecache-readpath");
    mountpoint_ = scratch_->path() + "/mnt";
    fs::create_directory(mountpoint_);
  }

  void TearDown() override {
    Unmount();
    if (process_) process_->Stop();
    EXPECT_FALSE(IsMounted(mountpoint_)) << "stale mount at " << mountpoint_;
    process_.reset();
    scratch_.reset();
  }

  // A foreground mount of the bucket with `extra` flags; waits until it is listed.
  void Mount(const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {
        LAKECACHE_BINARY, "mount",       std::string("s3://") + kBucket,
        mountpoint_,      "--endpoint",  server_->endpoint(),
        "--path-style",   "--log-level", "info"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto started = ChildProcess::Start(argv, scratch_->path() + "/mount.log",
                                       {"AWS_ACCESS_KEY_ID=S3RVER", "AWS_SECRET_ACCESS_KEY=S3RVER",
                                        "-AWS_ENDPOINT_URL", "-AWS_SESSION_TOKEN", "-AWS_PROFILE"});
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    process_ = std::move(started).value();
    auto deadline = Clock::now() + std::chrono::seconds(20);
    while (!IsMounted(mountpoint_)) {
      ASSERT_TRUE(process_->Running() && Clock::now() < deadline)
          << "not mounted: " << process_->LogTail();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  // Unmounts and waits for the mount process to end; returns its log.
  std::string Unmount() {
    Status unmounted = testing::UnmountForTest(mountpoint_);
    EXPECT_TRUE(unmounted.ok()) << unmounted.ToString();
    if (!process_) return "";
    auto deadline = Clock::now() + std::chrono::seconds(20);
    while (process_->Running() && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return ReadWhole(process_->log_path());
  }

  static inline testing::S3rver* server_ = nullptr;
  std::unique_ptr<TempDir> scratch_;
  std::string mountpoint_;
  std::unique_ptr<ChildProcess> process_;
};

TEST_F(ReadPathTest, SixteenSequentialReadersStayWithinMemoryCacheAndBudget) {
  Mount({"--memory-budget", "128MiB", "--mem-cache", "256MiB"});
  // `lakecache mount` holds the mount; its child, a fresh process, serves it and holds the cache.
  const pid_t server = ServerOf(process_->pid());
  ASSERT_GT(server, 0) << "the mount has no server: " << process_->LogTail();
  std::atomic<int> bad{0};
  std::vector<std::string> errors(kReaders);
  auto start = Clock::now();
  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&, r] {
      int fd = ::open((mountpoint_ + "/" + SequentialKey(r)).c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        errors[r] = std::string("open: ") + std::strerror(errno);
        bad.fetch_add(1);
        return;
      }
      std::unique_ptr<char[]> got(new char[kMiB]), want(new char[kMiB]);
      for (uint64_t chunk = 0; chunk < kSequentialSize / kMiB; ++chunk) {
        size_t have = 0;
        while (have < kMiB) {
          ssize_t n = ::read(fd, got.get() + have, kMiB - have);
          if (n <= 0) break;
          have += static_cast<size_t>(n);
        }
        MakeChunk(static_cast<uint64_t>(r), chunk, want.get());
        if (have != kMiB || std::memcmp(got.get(), want.get(), kMiB) != 0) {
          errors[r] = "chunk " + std::to_string(chunk) + " differs (" + std::to_string(have) +
                      " bytes read)";
          bad.fetch_add(1);
          break;
        }
      }
      char extra;
      if (errors[r].empty() && ::read(fd, &extra, 1) != 0) errors[r] = "no EOF";
      ::close(fd);
    });
  }
  for (auto& t : readers) t.join();
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  // Its peak, read while it still serves: exact, where a sampler on a busy machine misses peaks.
  const uint64_t max_rss = PeakRssBytes(server);
  for (int r = 0; r < kReaders; ++r) EXPECT_EQ(errors[r], "") << SequentialKey(r);
  EXPECT_EQ(bad.load(), 0);
  constexpr uint64_t kLimit = (256 + 128 + 64) * kMiB;
  EXPECT_GT(max_rss, 0u);
  if (!testing::kAddressSanitizer) {
    EXPECT_LT(max_rss, kLimit) << "max RSS " << max_rss / kMiB << " MiB";
  }
  std::string log = Unmount();
  std::printf(
      "16 readers x 48 MiB: %.1f s (%.0f MB/s), max RSS %llu MiB, fetches %lld, "
      "prefetches %lld, prefetch_used %lld, dropped %lld, refused %lld\n",
      seconds, kReaders * kSequentialSize / seconds / 1e6,
      static_cast<unsigned long long>(max_rss / kMiB), StatOf(log, "fetches"),
      StatOf(log, "prefetches"), StatOf(log, "prefetch_used"), StatOf(log, "prefetch_dropped"),
      StatOf(log, "prefetch_refused"));
  EXPECT_GT(StatOf(log, "prefetch_used"), 0) << "sequential readers should get read-ahead\n" << log;
}

TEST_F(ReadPathTest, RandomReaderFetchesOnlyTheBlocksItTouches) {
  Mount({});
  const std::string want = MakeObject(kRandomSeed, kRandomSize);
  int fd = ::open((mountpoint_ + "/" + kRandomKey).c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  void* raw = std::aligned_alloc(4096, 4096);
  ASSERT_NE(raw, nullptr);
  std::unique_ptr<char, decltype(&std::free)> buf(static_cast<char*>(raw), &std::free);
  // Only even blocks: a prefetch of any odd block would show as an extra fetch.
  std::mt19937_64 rng(42);
  std::set<uint64_t> touched;
  for (int i = 0; i < 200; ++i) {
    uint64_t block = 2 * (rng() % (kRandomSize / kBlock / 2));
    uint64_t offset = block * kBlock + rng() % (kBlock / 4096) * 4096;
    touched.insert(block);
    ssize_t n = ::pread(fd, buf.get(), 4096, static_cast<off_t>(offset));
    ASSERT_EQ(n, 4096) << "at " << offset << ": " << std::strerror(errno);
    ASSERT_EQ(std::memcmp(buf.get(), want.data() + offset, 4096), 0) << "at " << offset;
  }
  ::close(fd);
  std::string log = Unmount();
  EXPECT_EQ(StatOf(log, "prefetches"), 0) << log;
  EXPECT_EQ(StatOf(log, "fetches"), static_cast<long long>(touched.size())) << log;
}

}  // namespace
}  // namespace lakecache::read_path_test
