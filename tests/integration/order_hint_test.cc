// The order hint on real processes: a standalone mount and a cluster (master, two workers, a
// cluster mount) over s3rver behind a counting proxy. A reader that is not root announces a
// shuffled order of small files through `<mount>/.lakecache/prefetch` (with dd, and with the
// Python package under python/); the mount (or the workers) fetch every file before it is
// opened, so reading them in that order makes no further GET, and every byte read is checked. A
// wrong hint fetches no more than its window and never holds up a read.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "support/cluster_procs.h"
#include "support/counting_proxy.h"
#include "support/process.h"
#include "support/test_data.h"
#include "support/wait_for.h"

// Its own namespace: the files of integration_tests are compiled in unity batches.
namespace lakecache::order_hint_test {
namespace {

using testing::ChildProcess;
using testing::CountingProxy;

constexpr char kBucket[] = "hint";
constexpr int kClasses = 4;
constexpr int kPerClass = 30;
constexpr size_t kMinSize = 20 << 10;
constexpr size_t kMaxSize = 60 << 10;
constexpr char kNobody[] = "65534";

std::string FileKey(int c, int i) {
  // One level of folders: s3rver lists no folder at the top that holds only folders.
  return "c" + std::to_string(c) + "/f" + std::to_string(i) + ".bin";
}

size_t FileSize(int c, int i) {
  return kMinSize + (static_cast<size_t>(c * kPerClass + i) * 7919) % (kMaxSize - kMinSize);
}

std::string FileBytes(int c, int i) {
  std::string bytes(FileSize(c, i), '\0');
  std::mt19937_64 rng(static_cast<uint64_t>(c * 1000 + i));
  for (char& b : bytes) b = static_cast<char>(rng());
  return bytes;
}

// The whole file, or "error: ..." when it cannot be read.
std::string ReadFile(const std::string& path) {
  testing::FileBytes read = testing::ReadWholeFile(path);
  if (read.error != 0) return "error: cannot read " + path + ": " + std::strerror(read.error);
  return read.bytes;
}

class OrderHintTest : public testing::ClusterProcessFixture {
 protected:
  static void SetUpTestSuite() {
    auto started = testing::S3rver::Start({.buckets = {kBucket}});
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started).value().release();
    std::vector<std::pair<std::string, std::string>> objects;
    for (int c = 0; c < kClasses; ++c) {
      for (int i = 0; i < kPerClass; ++i) objects.push_back({FileKey(c, i), FileBytes(c, i)});
    }
    Status put = server_->PutObjects(kBucket, objects);
    ASSERT_TRUE(put.ok()) << put.ToString();
  }

  void SetUp() override {
    SetUpScratch("lakecache-hint");
    if (HasFatalFailure()) return;
    auto proxy = CountingProxy::Start(server_->endpoint());
    ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
    proxy_ = std::move(proxy).value();
    WriteConfig({{kBucket, proxy_->endpoint(), "1MiB"}});
    // Readers that are not root reach the mount and its scratch folder.
    ::chmod(dir_->path().c_str(), 0755);
  }

  void TearDown() override {
    if (standalone_ != nullptr) {
      Status unmounted = testing::UnmountForTest(mountpoint_);
      EXPECT_TRUE(unmounted.ok()) << unmounted.ToString();
      standalone_.reset();
    }
    ClusterProcessFixture::TearDown();
  }

  // A standalone mount of the config's namespace (a folder `hint` at the mount's root).
  void MountStandalone(const std::vector<std::string>& options,
                       const std::vector<std::string>& flags = {}) {
    std::vector<std::string> argv = {LAKECACHE_BINARY, "--config", config_,
                                     "mount",          "-o",       "allow_other"};
    for (const std::string& o : options) argv.insert(argv.end(), {"-o", o});
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back(mountpoint_);
    auto started = ChildProcess::Start(argv, dir_->path() + "/mount.log");
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    standalone_ = std::move(started).value();
    ASSERT_TRUE(WaitUntil([&] { return testing::IsMounted(mountpoint_); }, 20))
        << standalone_->LogTail();
  }

  static bool WaitUntil(const std::function<bool()>& done, int seconds) {
    auto deadline = Clock::now() + std::chrono::seconds(seconds);
    while (!done()) {
      if (Clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }

  // Every file, in a seeded shuffle.
  static std::vector<std::pair<int, int>> Shuffled(uint64_t seed) {
    std::vector<std::pair<int, int>> files;
    for (int c = 0; c < kClasses; ++c) {
      for (int i = 0; i < kPerClass; ++i) files.push_back({c, i});
    }
    std::shuffle(files.begin(), files.end(), std::mt19937_64(seed));
    return files;
  }

  // Writes `lines` to the control file `control` as the user nobody (the shell opens the list as
  // root; dd, as nobody, opens the control file).
  void HintAsNobody(const std::string& control, const std::vector<std::string>& lines) {
    std::string list = dir_->path() + "/hint.txt";
    {
      std::ofstream out(list);
      for (const std::string& l : lines) out << l << "\n";
    }
    testing::RunResult r = testing::RunCommand(
        {"sh", "-c",
         std::string("exec setpriv --reuid=") + kNobody + " --regid=" + kNobody +
             " --clear-groups dd of=\"$1\" bs=64k status=none < \"$2\"",
         "sh", control, list},
        {}, std::chrono::seconds(20));
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  // Reads every file of `order` from `root` (the namespace's folder) and checks its bytes.
  void ReadAndCheck(const std::string& root, const std::vector<std::pair<int, int>>& order) {
    for (auto [c, i] : order) {
      std::string got = ReadFile(root + "/" + FileKey(c, i));
      ASSERT_TRUE(got == FileBytes(c, i))
          << FileKey(c, i) << ": " << got.size() << " bytes read, not the " << FileSize(c, i)
          << " written" << (got.starts_with("error: ") ? " (" + got + ")" : "");
    }
  }

  uint64_t ObjectGets() const { return proxy_->counts().object_gets; }

  // Blocks the disk tier has given out, from the mount's /metrics on `port`.
  static uint64_t DiskHits(int port) {
    testing::RunResult r = testing::RunCommand(
        {"curl", "-sf", "http://127.0.0.1:" + std::to_string(port) + "/metrics"}, {},
        std::chrono::seconds(30));
    uint64_t hits = 0;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      if (!line.starts_with("lakecache_cache_hits_total{") ||
          line.find("tier=\"disk\"") == std::string::npos) {
        continue;
      }
      hits += static_cast<uint64_t>(std::stod(line.substr(line.rfind(' ') + 1)));
    }
    return hits;
  }

  std::unique_ptr<CountingProxy> proxy_;
  std::unique_ptr<ChildProcess> standalone_;
};

TEST_F(OrderHintTest, StandaloneMountFetchesTheHintedOrderAheadAndChangesNoByte) {
  int metrics_port = testing::FreeLoopbackPort();
  MountStandalone({}, {"--metrics-listen", "127.0.0.1:" + std::to_string(metrics_port)});
  ASSERT_FALSE(HasFatalFailure());
  // The control folder is reachable by name, never listed; any user may write its file.
  for (const auto& entry : std::filesystem::directory_iterator(mountpoint_)) {
    EXPECT_NE(entry.path().filename(), ".lakecache");
  }
  struct stat st {};
  ASSERT_EQ(::stat((mountpoint_ + "/.lakecache/prefetch").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u);
  ASSERT_EQ(::stat((mountpoint_ + "/hint/.lakecache/prefetch").c_str(), &st), 0);

  std::vector<std::pair<int, int>> order = Shuffled(7);
  std::vector<std::string> lines;
  for (auto [c, i] : order) lines.push_back("hint/" + FileKey(c, i));
  uint64_t gets_before = ObjectGets();
  HintAsNobody(mountpoint_ + "/.lakecache/prefetch", lines);
  ASSERT_FALSE(HasFatalFailure());
  // Every hinted file is fetched before anything is read.
  const uint64_t files = order.size();
  EXPECT_TRUE(WaitUntil([&] { return ObjectGets() - gets_before >= files; }, 30))
      << ObjectGets() - gets_before << " of " << files << " fetched; "
      << ReadFile(mountpoint_ + "/.lakecache/prefetch");
  std::string status = ReadFile(mountpoint_ + "/.lakecache/prefetch");
  EXPECT_NE(status.find("files hinted " + std::to_string(files)), std::string::npos) << status;
  ReadAndCheck(mountpoint_ + "/hint", order);
  // Read in the hinted order, every file came from what the hint fetched: no GET more.
  EXPECT_EQ(ObjectGets() - gets_before, files) << testing::ToString(proxy_->counts());
  status = ReadFile(mountpoint_ + "/.lakecache/prefetch");
  EXPECT_NE(status.find("read after fetch " + std::to_string(files)), std::string::npos) << status;
}

TEST_F(OrderHintTest, AWrongHintFetchesAtMostItsWindowAndNeverHoldsUpAReader) {
  constexpr uint64_t kWindow = 256 << 10;
  MountStandalone({"client.order_hint_window=256KiB"});
  ASSERT_FALSE(HasFatalFailure());
  // Class 0 is announced (with paths that name nothing), class 1 is what gets read.
  std::vector<std::string> lines = {"hint/no/such/file.bin", "../../etc/passwd", "hint/c1"};
  for (int i = 0; i < kPerClass; ++i) lines.push_back("hint/" + FileKey(0, i));
  const uint64_t log_start = proxy_->counts().log_entries();
  const uint64_t gets_before = ObjectGets();
  HintAsNobody(mountpoint_ + "/.lakecache/prefetch", lines);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_TRUE(WaitUntil([&] { return ObjectGets() > gets_before; }, 20));

  // Reads of other files go straight on, and their bytes are right.
  std::vector<std::pair<int, int>> others;
  for (int i = 0; i < kPerClass; ++i) others.push_back({1, i});
  // One held up behind the hint would wait for the order's idle drop (2 min).
  auto start = Clock::now();
  ReadAndCheck(mountpoint_ + "/hint", others);
  EXPECT_LT(Clock::now() - start, testing::kWaitTimeout);
  // Counted by key, so it holds however far the hint has got: nothing of class 0 is read, so its
  // window never frees, and each class 1 file was one GET of its reader's (none of the hint's).
  // The window holds files of at least kMinSize; one more starts while it is not yet full.
  uint64_t hinted = 0, read = 0;
  std::istringstream requests(proxy_->RequestsSince(log_start, 10000));
  for (std::string line; std::getline(requests, line);) {
    hinted += line.starts_with(std::string("GET /") + kBucket + "/c0/") ? 1 : 0;
    read += line.starts_with(std::string("GET /") + kBucket + "/c1/") ? 1 : 0;
  }
  EXPECT_GE(hinted, 1u);
  EXPECT_LE(hinted, kWindow / kMinSize + 1);
  EXPECT_LT(hinted, static_cast<uint64_t>(kPerClass));
  EXPECT_EQ(read, static_cast<uint64_t>(kPerClass)) << testing::ToString(proxy_->counts());
  std::string status = ReadFile(mountpoint_ + "/.lakecache/prefetch");
  EXPECT_NE(status.find("not found 3"), std::string::npos) << status;
}

// A mount restarted over its disk cache (as after a load and a restart) starts with an empty memory
// tier: the hint reads the hinted files' blocks from disk ahead of the readers, into memory, with
// no GET, and every byte read is still checked.
TEST_F(OrderHintTest, AfterARestartTheHintLoadsTheDiskCacheAhead) {
  const std::string cache = dir_->path() + "/cache";
  const std::vector<std::string> flags = {"--cache-dir", cache,         "--cache-size",
                                          "64MiB",       "--log-level", "info"};
  MountStandalone({}, flags);
  ASSERT_FALSE(HasFatalFailure());
  std::vector<std::pair<int, int>> order = Shuffled(5);
  ReadAndCheck(mountpoint_ + "/hint", order);               // cold: every block to memory and disk
  Status unmounted = testing::UnmountForTest(mountpoint_);  // writes the disk tier's queue
  ASSERT_TRUE(unmounted.ok()) << unmounted.ToString();
  ASSERT_TRUE(WaitUntil([&] { return !standalone_->Running(); }, 20)) << standalone_->LogTail();
  standalone_.reset();

  const int metrics_port = testing::FreeLoopbackPort();
  std::vector<std::string> with_metrics = flags;
  with_metrics.insert(with_metrics.end(),
                      {"--metrics-listen", "127.0.0.1:" + std::to_string(metrics_port)});
  MountStandalone({}, with_metrics);
  ASSERT_FALSE(HasFatalFailure());
  const uint64_t gets_before = ObjectGets();
  std::vector<std::string> lines;
  for (auto [c, i] : order) lines.push_back("hint/" + FileKey(c, i));
  HintAsNobody(mountpoint_ + "/.lakecache/prefetch", lines);
  ASSERT_FALSE(HasFatalFailure());
  const std::string fetched = "fetched " + std::to_string(order.size()) + " (";
  EXPECT_TRUE(WaitUntil(
      [&] {
        return ReadFile(mountpoint_ + "/.lakecache/prefetch").find(fetched) != std::string::npos;
      },
      30))
      << ReadFile(mountpoint_ + "/.lakecache/prefetch");
  // "fetched" counts loads started. Each ends with its block's disk hit (one block a file), just
  // before the block is staged; a reader that comes in between joins the load and takes the
  // block from staging all the same.
  EXPECT_TRUE(testing::WaitFor([&] { return DiskHits(metrics_port) >= order.size(); }))
      << DiskHits(metrics_port) << " of " << order.size() << " blocks loaded from disk";
  ReadAndCheck(mountpoint_ + "/hint", order);
  EXPECT_EQ(ObjectGets(), gets_before) << testing::ToString(proxy_->counts());
  unmounted = testing::UnmountForTest(mountpoint_);
  ASSERT_TRUE(unmounted.ok()) << unmounted.ToString();
  ASSERT_TRUE(WaitUntil([&] { return !standalone_->Running(); }, 20)) << standalone_->LogTail();
  // Every file was taken from what the hint had loaded from disk: none was read on demand.
  std::string log = standalone_->LogTail(4000);
  size_t at = log.rfind("cache stats:");
  ASSERT_NE(at, std::string::npos) << log;
  std::string stats = log.substr(at, log.find('\n', at) - at);
  EXPECT_NE(stats.find(" fetches=0 "), std::string::npos) << stats;
  EXPECT_NE(stats.find(" prefetch_used=" + std::to_string(order.size()) + " "), std::string::npos)
      << stats;
  standalone_.reset();
}

TEST_F(OrderHintTest, ClusterMountHasTheWorkersFetchTheOrderTheSamplerGives) {
  StartCluster({{"64MiB", "256MiB"}, {"64MiB", "256MiB"}});
  ASSERT_FALSE(HasFatalFailure());
  Mount({"-o", "allow_other"});
  ASSERT_FALSE(HasFatalFailure());
  std::vector<std::pair<int, int>> order = Shuffled(11);
  // The Python package's sampler wrapper, run as nobody, gives the order through the namespace's
  // own control folder (what a pod that sees only the namespace's folder reaches).
  std::string script = dir_->path() + "/hint.py";
  {
    std::ofstream py(script);
    py << "import sys\n"
       << "sys.path.insert(0, sys.argv[1])\n"
       << "from lakecache.hint import OrderHintSampler\n"
       << "paths = sys.argv[3:]\n"
       << "sampler = OrderHintSampler(range(len(paths)), lambda i: sys.argv[2] + '/' + "
          "paths[i])\n"
       << "assert list(sampler) == list(range(len(paths)))\n";
  }
  std::vector<std::string> argv = {"setpriv",
                                   std::string("--reuid=") + kNobody,
                                   std::string("--regid=") + kNobody,
                                   "--clear-groups",
                                   "/usr/bin/python3",
                                   script,
                                   std::string(LAKECACHE_SOURCE_DIR) + "/python",
                                   mountpoint_ + "/hint"};
  for (auto [c, i] : order) argv.push_back(FileKey(c, i));
  uint64_t fetches_before = TotalFetches();
  testing::RunResult r =
      testing::RunCommand(argv, {"PYTHONDONTWRITEBYTECODE=1"}, std::chrono::seconds(60));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const uint64_t files = order.size();
  EXPECT_TRUE(WaitUntil([&] { return TotalFetches() - fetches_before >= files; }, 30))
      << TotalFetches() - fetches_before << " of " << files << " fetched by the workers";
  uint64_t gets_before = ObjectGets();
  ReadAndCheck(mountpoint_ + "/hint", order);
  // The workers hold every file: reading them costs the store nothing.
  EXPECT_EQ(ObjectGets() - gets_before, 0u) << testing::ToString(proxy_->counts());
  EXPECT_EQ(TotalFetches() - fetches_before, files);
}

}  // namespace
}  // namespace lakecache::order_hint_test
