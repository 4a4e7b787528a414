// The native data path of a cluster mount: a real master, real workers on this host (whose memory
// the mount maps) and native readers (this process, and native_probe as other processes).
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "native_client/lakecache_native.h"
#include "support/cluster_procs.h"

namespace lakecache {
namespace {

constexpr char kBucket[] = "nat";
constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kSize = 8 * kMiB + 3;  // nine 1 MiB blocks, the last one short

std::string Object() {
  std::string out(kSize, '\0');
  for (uint64_t i = 0; i < kSize; ++i) out[i] = static_cast<char>((i * 7 + i / 4099) % 253);
  return out;
}

// Mappings of a worker's memory arenas in process `pid` ("self" for this one).
int ArenaMappings(const std::string& pid) {
  std::ifstream maps("/proc/" + pid + "/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) {
    n += line.find("memfd:lakecache-arena") != std::string::npos;
  }
  return n;
}

class NativeClusterTest : public testing::ClusterProcessFixture {
 protected:
  static void SetUpTestSuite() {
    auto started = testing::S3rver::Start({.buckets = {kBucket}});
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started).value().release();
    ASSERT_TRUE(server_
                    ->PutObjects(kBucket, {{"big.bin", Object()},
                                           {"other.bin", std::string(40 * kMiB, 'x')}})
                    .ok());
  }

  void SetUp() override {
    ASSERT_TRUE(HaveRootAndFuse())
        << "the native data path's tests mount FUSE: run them as root with /dev/fuse";
    SetUpScratch("lakecache-native-cluster");
    WriteConfig({{kBucket, server_->endpoint(), "1MiB"}});
  }

  std::string Path() const { return mountpoint_ + "/" + kBucket + "/big.bin"; }

  static bool WaitUntil(const std::function<bool()>& done, int seconds) {
    auto deadline = Clock::now() + std::chrono::seconds(seconds);
    while (!done()) {
      if (Clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }
};

// Warm blocks come by reference from the co-located worker's memory, which this process maps;
// a reader killed while holding some lets go of them, in the mount's server and in the worker.
TEST_F(NativeClusterTest, CoLocatedBlocksAreReadInPlaceFromTheWorkersMemory) {
  StartCluster({{"256MiB", "1GiB"}});
  Mount();
  const std::string want = Object();
  lc_client* c = lc_attach(Path().c_str());
  ASSERT_NE(c, nullptr) << lc_last_error();
  lc_file* f = lc_open(c, Path().c_str());
  ASSERT_NE(f, nullptr) << lc_last_error();
  ASSERT_EQ(lc_size(f), kSize);
  for (int pass = 0; pass < 2; ++pass) {  // cold (the worker fetches), then warm
    std::string got(kSize, '\0');
    ASSERT_EQ(lc_pread(f, got.data(), got.size(), 0), static_cast<ssize_t>(kSize))
        << lc_last_error();
    EXPECT_TRUE(got == want) << "pass " << pass;
  }
  lc_view v;
  ASSERT_EQ(lc_view_range(f, 3 * kMiB + 5, kMiB, &v), 0) << lc_last_error();
  ASSERT_EQ(v.length, kMiB - 5);
  EXPECT_EQ(std::memcmp(v.data, want.data() + 3 * kMiB + 5, v.length), 0);
  EXPECT_GE(ArenaMappings("self"), 1) << "the view is not of the worker's memory";
  lc_release(c, &v);
  lc_close(f);
  lc_detach(c);

  // Another process holds views of the worker's memory and is killed.
  auto holder = testing::ChildProcess::Start({NATIVE_PROBE_BINARY, "hold", Path(), "6"},
                                             dir_->path() + "/hold.log");
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  ASSERT_TRUE(
      WaitUntil([&] { return (*holder)->LogTail().find("holding 6") != std::string::npos; }, 30))
      << (*holder)->LogTail();
  ::kill((*holder)->pid(), SIGKILL);
  std::string log = dir_->path() + "/mount.log";
  EXPECT_TRUE(WaitUntil(
      [&] {
        std::ifstream in(log);
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        return text.find("held 1 files open and 6 ranges") != std::string::npos;
      },
      20))
      << mount_->LogTail();
  // Nothing of the worker's memory stays held for the mount: no bytes wait on an anchor.
  EXPECT_TRUE(WaitUntil([&] { return Stats(workers_[0]).shm_deferred_bytes() == 0; }, 20))
      << Stats(workers_[0]).shm_deferred_bytes() << " bytes still anchored";
  Unmount();
}

// A view of the co-located worker's memory is held in a session of the reader's own at the worker:
// the mount's server is killed and the worker's memory is filled with other blocks, and the view
// still shows its bytes; once released, the worker's memory is all free again.
TEST_F(NativeClusterTest, AViewOfTheWorkersMemoryOutlivesTheMountsServer) {
  StartCluster({{"16MiB", "1GiB"}});
  Mount();
  uint64_t sessions = Stats(workers_[0]).shm_sessions();  // the mount's
  const std::string want = Object();
  lc_client* c = lc_attach(Path().c_str());
  ASSERT_NE(c, nullptr) << lc_last_error();
  lc_file* f = lc_open(c, Path().c_str());
  ASSERT_NE(f, nullptr) << lc_last_error();
  std::string got(kSize, '\0');
  for (int pass = 0; pass < 2; ++pass) {  // cold, then warm: in the worker's memory
    ASSERT_EQ(lc_pread(f, got.data(), got.size(), 0), static_cast<ssize_t>(kSize))
        << lc_last_error();
  }
  lc_view v;
  ASSERT_EQ(lc_view_range(f, 2 * kMiB, kMiB, &v), 0) << lc_last_error();
  ASSERT_EQ(v.length, kMiB);
  ASSERT_GE(ArenaMappings("self"), 1) << "the view is not of the worker's memory";
  ASSERT_EQ(std::memcmp(v.data, want.data() + 2 * kMiB, kMiB), 0);
  EXPECT_EQ(Stats(workers_[0]).shm_sessions(), sessions + 1) << "no session of the reader's";

  pid_t server = MountServerPid();
  ASSERT_GT(server, 0);
  ASSERT_EQ(::kill(server, SIGKILL), 0);
  // The mount comes back with a new server; 40 MiB read through it go through the worker's 16.
  ASSERT_TRUE(WaitUntil([&] { return MountServerPid() != server; }, 30));
  std::string other = mountpoint_ + "/" + kBucket + "/other.bin";
  for (int pass = 0; pass < 2; ++pass) {
    std::ifstream in(other, std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_EQ(all.size(), 40 * kMiB);
  }
  EXPECT_EQ(std::memcmp(v.data, want.data() + 2 * kMiB, kMiB), 0)
      << "the worker reused memory a view shows";
  EXPECT_GT(Stats(workers_[0]).shm_deferred_bytes(), 0u);
  lc_release(c, &v);
  EXPECT_TRUE(WaitUntil([&] { return Stats(workers_[0]).shm_deferred_bytes() == 0; }, 20))
      << Stats(workers_[0]).shm_deferred_bytes() << " bytes still anchored";
  // The reader goes on with the new server.
  ASSERT_EQ(lc_pread(f, got.data(), got.size(), 0), static_cast<ssize_t>(kSize)) << lc_last_error();
  EXPECT_TRUE(got == want);
  lc_close(f);
  lc_detach(c);
  Unmount();
}

// Two workers on this host; one is SIGKILLed and restarted while native readers read the file
// again and again, every byte compared: no error, no wrong byte.
TEST_F(NativeClusterTest, AWorkerKilledAndRestartedUnderNativeReadersCostsNothing) {
  StartCluster({{"256MiB", "1GiB"}, {"256MiB", "1GiB"}});
  Mount();
  std::vector<std::unique_ptr<testing::ChildProcess>> readers;
  for (int i = 0; i < 3; ++i) {
    auto r = testing::ChildProcess::Start({NATIVE_PROBE_BINARY, "loop", Path(), "10"},
                                          dir_->path() + "/loop-" + std::to_string(i) + ".log");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    readers.push_back(std::move(*r));
  }
  for (auto& r : readers) {
    ASSERT_TRUE(WaitUntil([&] { return r->LogTail().find("reading") != std::string::npos; }, 30))
        << r->LogTail();
  }
  testing::WorkerProcess& victim = workers_[0];
  ASSERT_EQ(::kill(victim.process->pid(), SIGKILL), 0);
  ASSERT_TRUE(WaitUntil([&] { return !victim.process->Running(); }, 20));
  StartWorker(victim);
  for (auto& r : readers) {
    ASSERT_TRUE(WaitUntil([&] { return !r->Running(); }, 60));
    std::string out = r->LogTail();
    EXPECT_NE(out.find("errors=0 wrong=0"), std::string::npos) << out;
    EXPECT_EQ(out.find("passes=0 "), std::string::npos) << out;
  }
  Unmount();
}

}  // namespace
}  // namespace lakecache
