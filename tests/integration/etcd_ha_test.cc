// No single point of failure: three `lakecache master --etcd` processes over a real 3-member etcd
// (Debian's etcd-server, started here on loopback, its data on tmpfs), three workers and a cluster
// mount that know the masters as a list (`--master a,b,c`), four readers checking every byte.
//
// - The leading master SIGKILLed: no read fails, another master leads within two election leases,
//   a folder never listed before lists within two leases, a new worker joins through the
//   survivors and `lakecache load` runs on the new leader.
// - A load whose leader is SIGKILLed mid-stream ends with a message that says to run it again, and
//   the rerun on the new leader finishes, skipping what was already cached; one whose leader stops
//   leading (etcd out of reach) ends saying so too.
// - The leading master and etcd's raft leader SIGKILLed together: no read fails, and another master
//   leads within two election leases of etcd's recovery plus etcd's election timeout.
// - One etcd member SIGKILLed: nothing is noticed. Every member stopped: cached reads go on, the
//   masters keep their last view (marked stale), what needs etcd fails at once with a message that
//   says so, and everything serves again once etcd is back.
//
// Needs root and /dev/fuse.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "rpc/lakecache.grpc.pb.h"
#include "support/background_command.h"
#include "support/cluster_procs.h"
#include "support/counting_proxy.h"
#include "support/etcd_cluster.h"
#include "support/process.h"
#include "support/test_servers.h"
#include "support/wait_for.h"

// Its own namespace: the files of integration_tests are compiled in unity batches.
namespace lakecache::etcd_ha_test {
namespace {

namespace fs = std::filesystem;
using testing::RunCommand;
using testing::RunResult;
using testing::WorkerProcess;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kMiB = 1 << 20;
constexpr char kBucket[] = "ha";
constexpr int kFiles = 6;
constexpr uint64_t kFileSize = 8 * kMiB;
constexpr int kFreshDirs = 5;  // data/fresh-K: folders no one lists before the fault
constexpr int kFreshFiles = 5;
constexpr char kSlowBucket[] = "ha-slow";  // behind a proxy that caps the store's bandwidth
constexpr int kSlowFiles = 12;
constexpr uint64_t kSlowFileSize = kMiB;
constexpr uint64_t kSlowBandwidth = kMiB;  // bytes/s: a load of the slow bucket takes ~12 s
constexpr auto kElectionTtl = std::chrono::seconds(4);  // --election-ttl

std::string DataKey(int i) { return "data/part-" + std::to_string(i) + ".bin"; }
std::string FreshKey(int dir, int file) {
  return "data/fresh-" + std::to_string(dir) + "/f-" + std::to_string(file) + ".txt";
}

// Byte `offset` of data file `file`: cheap to check without keeping the content.
char DataByte(int file, uint64_t offset) {
  uint64_t x = (offset / 8 + 1) * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(file) << 56;
  return static_cast<char>(x >> ((offset % 8) * 8));
}

std::string DataContent(int file) {
  std::string out(kFileSize, '\0');
  for (uint64_t i = 0; i < kFileSize; ++i) out[i] = DataByte(file, i);
  return out;
}

// Four readers that open, read whole and check the data files through the mount until stopped.
class Readers {
 public:
  explicit Readers(std::string root) : root_(std::move(root)) {
    for (int r = 0; r < 4; ++r) threads_.emplace_back([this, r] { Run(r); });
  }
  ~Readers() { Stop(); }

  void WaitForFiles(uint64_t more) {
    uint64_t target = files_.load() + more;
    auto deadline = Clock::now() + std::chrono::seconds(60);
    while (files_.load() < target && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  uint64_t files() const { return files_.load(); }
  void Stop() {
    stop_ = true;
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }
  uint64_t failed() const { return failed_.load(); }
  // Stops them after `more` reads, says how many there were, and expects none failed.
  void FinishExpectingNoFailure(uint64_t more = 8) {
    WaitForFiles(more);
    Stop();
    std::cout << files() << " files read, " << failed() << " failed\n";
    EXPECT_EQ(failed(), 0u) << first_error();
  }
  std::string first_error() {
    std::lock_guard lock(mu_);
    return first_error_;
  }

 private:
  void Run(int r) {
    std::unique_ptr<char[]> buf(new char[kMiB]);
    for (int n = r; !stop_; ++n) {
      int file = n % kFiles;
      std::string path = root_ + "/" + DataKey(file);
      std::string error = Check(path, file, buf.get());
      if (!error.empty()) {
        failed_.fetch_add(1);
        std::lock_guard lock(mu_);
        if (first_error_.empty()) first_error_ = error;
      }
      files_.fetch_add(1);
    }
  }

  static std::string Check(const std::string& path, int file, char* buf) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return path + ": open: " + std::strerror(errno);
    uint64_t offset = 0;
    std::string error;
    while (error.empty()) {
      ssize_t n = ::read(fd, buf, kMiB);
      if (n < 0) {
        error = path + ": read at " + std::to_string(offset) + ": " + std::strerror(errno);
        break;
      }
      if (n == 0) break;
      for (ssize_t i = 0; i < n; ++i) {
        if (buf[i] != DataByte(file, offset + static_cast<uint64_t>(i))) {
          error = path + ": wrong byte at " + std::to_string(offset + static_cast<uint64_t>(i));
          break;
        }
      }
      offset += static_cast<uint64_t>(n);
    }
    ::close(fd);
    if (error.empty() && offset != kFileSize)
      error = path + ": " + std::to_string(offset) + " bytes";
    return error;
  }

  const std::string root_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> files_{0}, failed_{0};
  std::mutex mu_;
  std::string first_error_;
  std::vector<std::thread> threads_;
};

class EtcdHaTest : public testing::ClusterProcessFixture {
 protected:
  static void SetUpTestSuite() {
    auto started = testing::S3rver::Start({.buckets = {kBucket, kSlowBucket}});
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started).value().release();
    std::vector<std::pair<std::string, std::string>> objects;
    for (int i = 0; i < kFiles; ++i) objects.push_back({DataKey(i), DataContent(i)});
    for (int d = 0; d < kFreshDirs; ++d) {
      for (int f = 0; f < kFreshFiles; ++f)
        objects.push_back({FreshKey(d, f), "fresh " + FreshKey(d, f)});
    }
    Status put = server_->PutObjects(kBucket, objects);
    ASSERT_TRUE(put.ok()) << put.ToString();
    objects.clear();
    for (int i = 0; i < kSlowFiles; ++i) {
      objects.push_back({"slow/f-" + std::to_string(i), std::string(kSlowFileSize, 'a' + i)});
    }
    put = server_->PutObjects(kSlowBucket, objects);
    ASSERT_TRUE(put.ok()) << put.ToString();
  }

  void SetUp() override {
    SetUpScratch("lakecache-etcd-ha");
    if (HasFatalFailure()) return;
    auto proxy = testing::CountingProxy::Start(server_->endpoint());
    ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
    proxy_ = std::move(proxy).value();
    WriteConfig({{kBucket, server_->endpoint(), "1MiB", "1s"},
                 {kSlowBucket, proxy_->endpoint(), "256KiB", "1s"}});
    auto etcd = testing::EtcdCluster::Start(3);
    ASSERT_TRUE(etcd.ok()) << etcd.status().ToString();
    etcd_ = std::move(etcd).value();
  }

  void TearDown() override {
    Unmount();
    for (auto& m : masters_) {
      if (m.process) m.process->Stop();
    }
    ClusterProcessFixture::TearDown();
    masters_.clear();
    etcd_.reset();
    proxy_.reset();
  }

  struct Master {
    std::string address;
    std::unique_ptr<testing::ChildProcess> process;
  };

  // Three masters on fixed loopback ports with etcd; master_address_ becomes their list, which
  // the workers and the mount are given.
  void StartMasters(int n = 3) {
    std::string list;
    for (int i = 0; i < n; ++i) {
      Master m;
      m.address = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
      list += (i ? "," : "") + m.address;
      masters_.push_back(std::move(m));
    }
    for (int i = 0; i < n; ++i) StartMasterProcess(i);
    master_address_ = list;
  }

  void StartMasterProcess(int i) {
    std::string name = "master-" + std::to_string(i + 1);
    std::vector<std::string> argv = Lakecache(name);
    argv.insert(argv.end(),
                {"master", "--listen", masters_[i].address, "--etcd", etcd_->endpoints(),
                 "--election-ttl", std::to_string(kElectionTtl.count())});
    auto started = testing::ChildProcess::Start(argv, dir_->path() + "/" + name + ".out");
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    masters_[i].process = std::move(started).value();
  }

  void AddWorker(const std::string& name) {
    WorkerProcess w;
    w.name = name;
    w.cache_dir = dir_->path() + "/" + w.name;
    w.mem_cache = "64MiB";
    w.cache_size = "256MiB";
    workers_.push_back(std::move(w));
    StartWorker(workers_.back());
    ASSERT_FALSE(workers_.back().address.empty());
  }

  // Master i's view; false when it does not answer.
  bool ViewOf(int i, rpc::ClusterView* view) {
    auto stub = rpc::MasterService::NewStub(rpc::OpenChannel(masters_[i].address));
    grpc::ClientContext ctx;
    rpc::SetTimeout(&ctx, std::chrono::seconds(3));
    return stub->GetClusterView(&ctx, rpc::ClusterViewRequest(), view).ok();
  }

  // Waits until every running master's view lists `workers` workers and names a leader other than
  // `not_leader`; returns the leader's index (-1 on timeout).
  int WaitForCluster(size_t workers, const std::string& not_leader,
                     std::chrono::seconds timeout = std::chrono::seconds(30)) {
    auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      int leader = -1;
      bool all = true;
      for (size_t i = 0; i < masters_.size() && all; ++i) {
        if (!masters_[i].process || !masters_[i].process->Running()) continue;
        rpc::ClusterView view;
        all = ViewOf(static_cast<int>(i), &view) &&
              static_cast<size_t>(view.workers_size()) == workers && !view.leader().empty() &&
              view.leader() != not_leader;
        for (size_t j = 0; all && j < masters_.size(); ++j) {
          if (masters_[j].address == view.leader()) leader = static_cast<int>(j);
        }
      }
      if (all && leader >= 0) return leader;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return -1;
  }

  std::vector<std::string> List(const std::string& dir) {
    std::vector<std::string> names;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      names.push_back(it->path().filename().string());
    }
    if (ec) names.clear();
    return names;
  }

  RunResult Lc(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {LAKECACHE_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, {"-LAKECACHE_CREDENTIALS", "-LAKECACHE_MASTER"},
                      std::chrono::seconds(90));
  }

  std::string Root() const { return mountpoint_ + "/" + kBucket; }

  // Masters and three workers, a leader known to every master.
  void StartClusterWithLeader() {
    StartMasters();
    ASSERT_FALSE(HasFatalFailure());
    for (int i = 1; i <= 3; ++i) {
      AddWorker("worker-" + std::to_string(i));
      ASSERT_FALSE(HasFatalFailure());
    }
    leader_ = WaitForCluster(3, "");
    ASSERT_GE(leader_, 0) << "no leader with 3 workers: " << masters_[0].process->LogTail();
  }

  // Everything up and warm: masters, three workers, the mount; every data file read once.
  void StartWarmCluster() {
    StartClusterWithLeader();
    ASSERT_FALSE(HasFatalFailure());
    Mount();
    ASSERT_FALSE(HasFatalFailure());
    Readers warm(Root());
    warm.WaitForFiles(2 * kFiles);
    warm.Stop();
    ASSERT_EQ(warm.failed(), 0u) << warm.first_error();
  }

  std::unique_ptr<testing::EtcdCluster> etcd_;
  std::unique_ptr<testing::CountingProxy> proxy_;
  std::vector<Master> masters_;
  int leader_ = -1;
};

TEST_F(EtcdHaTest, LeaderKilledUnderReadersCostsNoReadAndTheClusterMovesOn) {
  StartWarmCluster();
  ASSERT_FALSE(HasFatalFailure());
  Readers readers(Root());
  readers.WaitForFiles(8);
  // A load pins the listings of what it loaded: the pin outlives its leader.
  RunResult pin =
      Lc({"load", "/" + std::string(kBucket) + "/data/fresh-4", "-R", "--master", master_address_});
  ASSERT_EQ(pin.exit_code, 0) << pin.out << pin.err;
  std::string killed = masters_[leader_].address;
  ASSERT_EQ(::kill(masters_[leader_].process->pid(), SIGKILL), 0);
  auto kill_time = Clock::now();
  while (masters_[leader_].process->Running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  // A folder never listed before: the mount's listing goes to the leader, so it waits for one.
  std::vector<std::string> fresh;
  Clock::duration listed_after{};
  while (Clock::now() - kill_time < std::chrono::seconds(30)) {
    fresh = List(Root() + "/data/fresh-0");
    if (fresh.size() == static_cast<size_t>(kFreshFiles)) {
      listed_after = Clock::now() - kill_time;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  int leader = WaitForCluster(3, killed);
  auto led_after = Clock::now() - kill_time;
  ASSERT_GE(leader, 0) << "no new leader";
  auto ms = [](Clock::duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  };
  std::cout << "leader " << killed << " killed: " << masters_[leader].address << " leads after "
            << ms(led_after) << " ms (seen), an unlisted folder listed after " << ms(listed_after)
            << " ms\n";
  EXPECT_EQ(fresh.size(), static_cast<size_t>(kFreshFiles));
  EXPECT_LE(listed_after, 2 * kElectionTtl) << ms(listed_after) << " ms";
  EXPECT_LE(led_after, 2 * kElectionTtl + std::chrono::seconds(1)) << ms(led_after) << " ms";

  // The new leader pinned what the old one had: an object added to the store since stays out of
  // the listing until `lakecache free` unpins it.
  ASSERT_TRUE(server_->PutObjects(kBucket, {{"data/fresh-4/new.txt", "new"}}).ok());
  EXPECT_EQ(List(Root() + "/data/fresh-4").size(), static_cast<size_t>(kFreshFiles))
      << "the pinned listing was not pinned on the new leader";
  RunResult unpin =
      Lc({"free", "/" + std::string(kBucket) + "/data/fresh-4", "-R", "--master", master_address_});
  EXPECT_EQ(unpin.exit_code, 0) << unpin.out << unpin.err;
  std::vector<std::string> after_free;
  for (auto until = Clock::now() + std::chrono::seconds(10); Clock::now() < until;) {
    after_free = List(Root() + "/data/fresh-4");
    if (after_free.size() == static_cast<size_t>(kFreshFiles) + 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(after_free.size(), static_cast<size_t>(kFreshFiles) + 1) << "free did not unpin";

  // A new worker joins through the masters that are left (its list names the dead one first).
  AddWorker("worker-4");
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_GE(WaitForCluster(4, killed), 0) << "worker-4 never joined";

  // A load runs on the new leader, whichever master the command asks first.
  RunResult load =
      Lc({"load", "/" + std::string(kBucket) + "/data/fresh-0", "-R", "--master", master_address_});
  EXPECT_EQ(load.exit_code, 0) << load.out << load.err;

  readers.FinishExpectingNoFailure();
  EXPECT_TRUE(mount_->Running());
}

TEST_F(EtcdHaTest, ALoadWhoseLeaderIsKilledOrDeposedMidStreamSaysToRunItAgain) {
  StartClusterWithLeader();
  ASSERT_FALSE(HasFatalFailure());
  const std::vector<std::string> load = {
      LAKECACHE_BINARY, "load",         "/" + std::string(kSlowBucket) + "/slow", "-R", "--json",
      "--master",       master_address_};
  const std::vector<std::string> env = {"-LAKECACHE_CREDENTIALS", "-LAKECACHE_MASTER"};

  // The store slowed down, a load under way: a third of its bytes came through.
  const uint64_t total = kSlowFiles * kSlowFileSize;
  // Slows the store, starts the load in the background and waits until a third of it came.
  auto start_slow_load = [&](std::unique_ptr<testing::BackgroundCommand>* command) {
    proxy_->SetBandwidth(kSlowBandwidth);
    testing::ProxyCounts before = proxy_->counts();
    auto started = testing::BackgroundCommand::Start(load, env);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    *command = std::move(started).value();
    for (auto until = Clock::now() + std::chrono::seconds(60);
         (proxy_->counts() - before).response_bytes < total / 3 && Clock::now() < until;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_GE((proxy_->counts() - before).response_bytes, total / 3) << (*command)->Stderr();
  };
  std::unique_ptr<testing::BackgroundCommand> first;
  start_slow_load(&first);
  ASSERT_FALSE(HasFatalFailure());

  std::string killed = masters_[leader_].address;
  ASSERT_EQ(::kill(masters_[leader_].process->pid(), SIGKILL), 0);
  RunResult cut = first->Wait(std::chrono::seconds(60));
  proxy_->SetBandwidth(0);
  EXPECT_FALSE(cut.timed_out);
  EXPECT_EQ(cut.exit_code, 1) << cut.out << cut.err;
  EXPECT_NE(cut.err.find(killed + " went away during the load"), std::string::npos) << cut.err;
  EXPECT_NE(cut.err.find("run `lakecache load` again"), std::string::npos) << cut.err;
  std::cout << "the load's leader killed mid-stream: " << cut.err;

  // Run again: it goes to the new leader and loads only what the first run left.
  ASSERT_GE(WaitForCluster(3, killed), 0) << "no new leader";
  RunResult again = RunCommand(load, env, std::chrono::seconds(90));
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  auto summary = nlohmann::json::parse(again.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(summary.is_object()) << again.out;
  EXPECT_EQ(summary.value("complete", false), true) << again.out;
  uint64_t cached = summary["bytes"].value("already_cached", uint64_t{0});
  uint64_t loaded = summary["bytes"].value("loaded", uint64_t{0});
  EXPECT_GT(cached, 0u) << again.out;
  EXPECT_EQ(cached + loaded, total) << again.out;
  std::cout << "run again: " << loaded << " bytes loaded, " << cached << " already cached\n";

  // A leader that stops leading (etcd out of reach) while its load goes on: the load ends saying
  // so, rather than pinning what the next leader would not know of.
  RunResult freed = RunCommand({LAKECACHE_BINARY, "free", "/" + std::string(kSlowBucket) + "/slow",
                                "-R", "--master", master_address_},
                               env, std::chrono::seconds(60));
  ASSERT_EQ(freed.exit_code, 0) << freed.out << freed.err;
  std::unique_ptr<testing::BackgroundCommand> third;
  start_slow_load(&third);
  ASSERT_FALSE(HasFatalFailure());
  for (int m = 0; m < etcd_->size(); ++m) {
    if (etcd_->running(m)) etcd_->Kill(m);
  }
  // The leader's lead lapses (at half its lease) before the store speeds up: else the load could
  // finish first.
  EXPECT_TRUE(testing::WaitFor([&] {
    for (size_t i = 0; i < masters_.size(); ++i) {
      if (!masters_[i].process || !masters_[i].process->Running()) continue;
      rpc::ClusterView view;
      if (!ViewOf(static_cast<int>(i), &view) || view.leader() == masters_[i].address) return false;
    }
    return true;
  })) << "a master still leads with etcd gone";
  proxy_->SetBandwidth(0);
  RunResult deposed = third->Wait(std::chrono::seconds(60));
  EXPECT_EQ(deposed.exit_code, 1) << deposed.out << deposed.err;
  EXPECT_NE(deposed.err.find("stopped leading the cluster during the load"), std::string::npos)
      << deposed.err;
  EXPECT_EQ(deposed.err.find("went away"), std::string::npos) << deposed.err;
  EXPECT_NE(deposed.err.find("run `lakecache load` again"), std::string::npos) << deposed.err;
  std::cout << "the load's leader deposed mid-stream: " << deposed.err;
  ASSERT_TRUE(etcd_->RestartStopped().ok());
}

// The worst loss at once: the leading master and etcd's raft leader. etcd's next raft leader
// renews every lease for its TTL plus etcd's election timeout (2 s here), the dead master's too,
// so the masters lead again within two election leases of etcd's recovery plus that timeout.
TEST_F(EtcdHaTest, LeadingMasterAndEtcdsRaftLeaderKilledTogetherCostNoRead) {
  StartWarmCluster();
  ASSERT_FALSE(HasFatalFailure());
  Readers readers(Root());
  readers.WaitForFiles(8);
  int raft_leader = etcd_->RaftLeader();
  ASSERT_GE(raft_leader, 0);
  std::string killed = masters_[leader_].address;
  etcd_->Kill(raft_leader);
  ASSERT_EQ(::kill(masters_[leader_].process->pid(), SIGKILL), 0);
  auto kill_time = Clock::now();
  int raft = -1;
  while (raft < 0 && Clock::now() - kill_time < std::chrono::seconds(30)) {
    raft = etcd_->RaftLeader();
    if (raft < 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  auto raft_after = Clock::now() - kill_time;
  ASSERT_GE(raft, 0) << "etcd elected no raft leader";
  int leader = WaitForCluster(3, killed);
  auto led_after = Clock::now() - kill_time;
  ASSERT_GE(leader, 0) << "no new leader";
  auto ms = [](Clock::duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  };
  std::cout << "master " << killed << " and etcd member " << raft_leader
            << " killed: etcd led again after " << ms(raft_after) << " ms, "
            << masters_[leader].address << " leads after " << ms(led_after) << " ms (seen)\n";
  constexpr auto kEtcdElectionTimeout = std::chrono::seconds(2);  // EtcdCluster's
  EXPECT_LE(led_after,
            raft_after + 2 * kElectionTtl + kEtcdElectionTimeout + std::chrono::seconds(1))
      << ms(led_after) << " ms";
  EXPECT_EQ(List(Root() + "/data/fresh-1").size(), static_cast<size_t>(kFreshFiles));
  readers.FinishExpectingNoFailure();
}

TEST_F(EtcdHaTest, AnEtcdMemberLostGoesUnnoticedAndEtcdDownKeepsCachedReads) {
  StartWarmCluster();
  ASSERT_FALSE(HasFatalFailure());
  Readers readers(Root());
  readers.WaitForFiles(8);

  // One member (etcd's raft leader, the worst one) killed: nothing is noticed.
  int raft_leader = etcd_->RaftLeader();
  ASSERT_GE(raft_leader, 0);
  etcd_->Kill(raft_leader);
  // Kept, a window: "nothing is noticed" over two lease lengths of etcd's own time (another
  // process's clock, which no fake moves); a busy host only makes the window longer.
  std::this_thread::sleep_for(2 * kElectionTtl);
  EXPECT_EQ(List(Root() + "/data/fresh-1").size(), static_cast<size_t>(kFreshFiles));
  EXPECT_EQ(WaitForCluster(3, "", std::chrono::seconds(30)), leader_)
      << "the masters changed leader or lost a worker with one etcd member down";
  RunResult status = Lc({"cluster", "status", "--master", master_address_});
  EXPECT_EQ(status.exit_code, 0) << status.out << status.err;
  EXPECT_EQ(status.out.find("stale"), std::string::npos) << status.out;

  // Every member stopped: reads of what is cached go on past the workers' leases...
  for (int m = 0; m < etcd_->size(); ++m) {
    if (etcd_->running(m)) etcd_->Kill(m);
  }
  uint64_t before = readers.files();
  // Kept: the workers' leases in etcd must run out (etcd's time) before the reads that follow
  // show they go on without them.
  std::this_thread::sleep_for(2 * kElectionTtl);
  readers.WaitForFiles(8);
  EXPECT_GE(readers.files(), before + 8);
  // ...the masters keep their last view, and say it is stale...
  rpc::ClusterView view;
  ASSERT_TRUE(ViewOf((leader_ + 1) % 3, &view));
  EXPECT_EQ(view.workers_size(), 3);
  EXPECT_TRUE(view.stale());
  // A master started now (its host rebooted while etcd is down) waits for etcd and says so...
  masters_.push_back(Master{"127.0.0.1:" + std::to_string(testing::FreeLoopbackPort()), nullptr});
  StartMasterProcess(3);
  ASSERT_FALSE(HasFatalFailure());
  auto late_log = [&] { return testing::ReadFileTail(dir_->path() + "/master-4.log", 30000); };
  for (auto until = Clock::now() + std::chrono::seconds(30);
       late_log().find("waiting for etcd") == std::string::npos;) {
    ASSERT_TRUE(masters_[3].process->Running()) << late_log();
    ASSERT_LT(Clock::now(), until) << late_log();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // ...and what needs etcd fails at once, saying so.
  auto asked = Clock::now();
  RunResult load =
      Lc({"load", "/" + std::string(kBucket) + "/data/fresh-2", "-R", "--master", master_address_});
  EXPECT_NE(load.exit_code, 0);
  EXPECT_NE(load.err.find("etcd is out of reach"), std::string::npos) << load.err;
  auto answered = Clock::now() - asked;
  std::cout << "with etcd down, `lakecache load` failed after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(answered).count()
            << " ms: " << load.err;
  // At once, not asked again until the call's deadline; the bound leaves a busy machine room.
  EXPECT_LT(answered, testing::kWaitTimeout);

  // etcd back: a leader again, known to the master that waited too, and listings and loads work.
  ASSERT_TRUE(etcd_->RestartStopped().ok());
  EXPECT_GE(WaitForCluster(3, "", std::chrono::seconds(40)), 0);
  EXPECT_TRUE(masters_[3].process->Running()) << late_log();
  EXPECT_NE(late_log().find("etcd answers after"), std::string::npos) << late_log();
  std::vector<std::string> fresh;
  for (auto until = Clock::now() + std::chrono::seconds(20); Clock::now() < until;) {
    fresh = List(Root() + "/data/fresh-3");
    if (fresh.size() == static_cast<size_t>(kFreshFiles)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(fresh.size(), static_cast<size_t>(kFreshFiles));
  readers.FinishExpectingNoFailure(0);
}

}  // namespace
}  // namespace lakecache::etcd_ha_test
