// A cluster of real processes for integration tests: `lakecache master`, `lakecache worker`s and a
// cluster-mode FUSE mount (`lakecache mount --master`), each a child of the test with its log in
// the test's scratch folder, and the master's view and the workers' stats asked over gRPC.
//
// Header-only on purpose: it speaks gRPC (rpc/lakecache.grpc.pb.h), which the integration tests
// link (through lakecache_client) but the shared lakecache_test_support library does not.
//
// A fixture derives from ClusterProcessFixture, starts the suite's s3rver (server_) in its
// SetUpTestSuite, calls SetUpScratch() in its SetUp and writes the config (config_, WriteConfig())
// that master and workers read; TearDown unmounts and stops everything, TearDownTestSuite deletes
// the server.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"
#include "security/auth.h"
#include "support/fuse_mounts.h"
#include "support/test_servers.h"

namespace lakecache::testing {

struct WorkerProcess {
  std::string name;
  std::string cache_dir;
  std::string mem_cache;
  std::string cache_size;
  std::string address;
  std::vector<std::string> extra_args;  // after the worker's own flags, e.g. --credentials DIR
  std::unique_ptr<ChildProcess> process;
};

class ClusterProcessFixture : public ::testing::Test {
 protected:
  using Clock = std::chrono::steady_clock;

  // An S3 namespace of the config: the s3rver bucket of the same name at `endpoint` (the suite's
  // server's, or a proxy's in front of it), with cache blocks of `block_size` ("64KiB") and the
  // given `metadata_ttl` ("1s"; empty: the default).
  struct S3rverNamespace {
    std::string bucket;
    std::string endpoint;
    std::string block_size;
    std::string metadata_ttl = "";
  };

  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  // FUSE mounts need both.
  static bool HaveRootAndFuse() { return ::geteuid() == 0 && std::filesystem::exists("/dev/fuse"); }

  // The start of every SetUp: fails (fatally: check HasFatalFailure()) without root and /dev/fuse
  // or without the suite's server; else makes the test's scratch folder (dir_, named after
  // `prefix`), its empty mountpoint and the config's path (config_, for the fixture to write).
  void SetUpScratch(const std::string& prefix) {
    ASSERT_TRUE(HaveRootAndFuse()) << "needs root and /dev/fuse";
    ASSERT_NE(server_, nullptr) << "the suite's s3rver did not start or take the objects";
    dir_ = std::make_unique<TempDir>(prefix);
    mountpoint_ = dir_->path() + "/mnt";
    std::filesystem::create_directory(mountpoint_);
    config_ = dir_->path() + "/lake.yaml";
  }

  // Writes config_: `namespaces`, an LRU cache, and heartbeats every 500 ms that time out after
  // 2 s (a killed worker leaves the master's view within seconds).
  void WriteConfig(const std::vector<S3rverNamespace>& namespaces) const {
    std::ofstream yaml(config_);
    yaml << "namespaces:\n";
    for (const S3rverNamespace& ns : namespaces) {
      yaml << "  " << ns.bucket << ":\n"
           << "    uri: s3://" << ns.bucket << "/\n"
           << "    endpoint: " << ns.endpoint << "\n"
           << "    path_style: true\n"
           << "    access_key: S3RVER\n"
           << "    secret_key: S3RVER\n"
           << "    block_size: " << ns.block_size << "\n";
      if (!ns.metadata_ttl.empty()) yaml << "    metadata_ttl: " << ns.metadata_ttl << "\n";
    }
    yaml << "cache:\n  policy: lru\n"
         << "cluster: {heartbeat_interval: 500ms, heartbeat_timeout: 2s}\n";
  }

  void TearDown() override {
    Unmount();
    for (WorkerProcess& w : workers_) w.process.reset();
    if (master_) master_->Stop();
    EXPECT_FALSE(IsMounted(mountpoint_)) << "stale mount at " << mountpoint_;
    workers_.clear();
    master_.reset();
    dir_.reset();
  }

  // The argv prefix of a server process: the config, and logs in the scratch folder.
  std::vector<std::string> Lakecache(const std::string& log_name) const {
    return {LAKECACHE_BINARY,
            "--config",
            config_,
            "--log-level",
            "info",
            "--log-file",
            dir_->path() + "/" + log_name + ".log"};
  }

  // Waits for `path` (an --address-file) while `process` runs; returns its content.
  std::string WaitForAddress(ChildProcess& process, const std::string& path) {
    auto deadline = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < deadline && process.Running()) {
      std::ifstream in(path);
      std::string address;
      if (in && std::getline(in, address) && !address.empty()) return address;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << path << " never appeared: " << process.LogTail();
    return "";
  }

  // A credentials folder from `lakecache cert` at DIR/NAME.
  std::string MakeCredentials(const std::string& name) {
    std::string folder = dir_->path() + "/" + name;
    RunResult made = RunCommand({LAKECACHE_BINARY, "cert", "--dir", folder});
    EXPECT_EQ(made.exit_code, 0) << made.err;
    return folder;
  }

  // A master and one worker under TLS, with the credentials folder DIR/credentials (credentials_).
  void StartTlsCluster() {
    credentials_ = MakeCredentials("credentials");
    StartMaster();
    ASSERT_FALSE(master_address_.empty());
    WorkerProcess w;
    w.name = "worker-1";
    w.cache_dir = dir_->path() + "/" + w.name;
    w.mem_cache = "64MiB";
    w.cache_size = "256MiB";
    w.extra_args = {"--credentials", credentials_};
    workers_.push_back(std::move(w));
    StartWorker(workers_.back());
    WaitForView(1, std::chrono::seconds(20));
  }

  void StartMaster(const std::string& listen = "127.0.0.1:0") {
    std::vector<std::string> argv = Lakecache("master");
    std::string addr_file = dir_->path() + "/master.addr";
    std::filesystem::remove(addr_file);
    argv.insert(argv.end(), {"master", "--listen", listen, "--address-file", addr_file});
    if (!credentials_.empty()) argv.insert(argv.end(), {"--credentials", credentials_});
    argv.insert(argv.end(), master_args_.begin(), master_args_.end());
    auto started = ChildProcess::Start(argv, dir_->path() + "/master.out");
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    master_ = std::move(started).value();
    master_address_ = WaitForAddress(*master_, addr_file);
  }

  void StartWorker(WorkerProcess& w) {
    std::vector<std::string> argv = Lakecache(w.name);
    std::string addr_file = dir_->path() + "/" + w.name + ".addr";
    std::filesystem::remove(addr_file);
    argv.insert(argv.end(),
                {"worker", "--master", master_address_, "--address-file", addr_file, "--cache-dir",
                 w.cache_dir, "--cache-size", w.cache_size, "--mem-cache", w.mem_cache});
    argv.insert(argv.end(), w.extra_args.begin(), w.extra_args.end());
    auto started = ChildProcess::Start(argv, dir_->path() + "/" + w.name + ".out");
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    w.process = std::move(started).value();
    w.address = WaitForAddress(*w.process, addr_file);
  }

  // A master and one worker per (--mem-cache, --cache-size) pair; returns once the master's view
  // lists them all.
  void StartCluster(const std::vector<std::pair<std::string, std::string>>& mem_and_disk,
                    const std::string& master_listen = "127.0.0.1:0",
                    const std::vector<std::string>& worker_flags = {}) {
    StartMaster(master_listen);
    ASSERT_FALSE(master_address_.empty());
    for (size_t i = 0; i < mem_and_disk.size(); ++i) {
      WorkerProcess w;
      w.name = "worker-" + std::to_string(i + 1);
      w.cache_dir = dir_->path() + "/" + w.name;
      w.mem_cache = mem_and_disk[i].first;
      w.cache_size = mem_and_disk[i].second;
      w.extra_args = worker_flags;
      workers_.push_back(std::move(w));
      StartWorker(workers_.back());
      ASSERT_FALSE(workers_.back().address.empty());
    }
    WaitForView(workers_.size(), std::chrono::seconds(20));
  }

  // The master's view; false (and `error` set) when the master does not answer.
  bool TryView(rpc::ClusterView* view, std::string* error) {
    auto stub =
        rpc::MasterService::NewStub(security::MasterChannel(master_address_, Admin().get()));
    grpc::ClientContext ctx;
    rpc::SetTimeout(&ctx, std::chrono::seconds(5));
    grpc::Status st = stub->GetClusterView(&ctx, rpc::ClusterViewRequest(), view);
    if (!st.ok()) *error = st.error_message();
    return st.ok();
  }

  // The master's view; a failure when the master does not answer.
  rpc::ClusterView View() {
    rpc::ClusterView view;
    std::string error;
    EXPECT_TRUE(TryView(&view, &error)) << error;
    return view;
  }

  // Waits until the master's view lists `n` workers; returns how long that took. A master that
  // does not answer one poll (a handshake cut short on a busy host) is asked again.
  Clock::duration WaitForView(size_t n, Clock::duration timeout) {
    auto start = Clock::now();
    std::string error;
    while (Clock::now() - start < timeout) {
      rpc::ClusterView view;
      if (TryView(&view, &error) && static_cast<size_t>(view.workers_size()) == n)
        return Clock::now() - start;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "the master's view never listed " << n << " workers"
                  << (error.empty() ? "" : "; last error: " + error);
    return timeout;
  }

  rpc::WorkerStats Stats(const WorkerProcess& w) {
    std::string id;  // its certificate's name, with credentials
    if (!credentials_.empty()) {
      rpc::ClusterView view = View();
      for (const rpc::WorkerInfo& info : view.workers()) {
        if (info.address() == w.address) id = info.id();
      }
    }
    auto stub = rpc::WorkerService::NewStub(security::WorkerChannel(w.address, id, Admin().get()));
    // A call that times out on a machine busy with other tests is asked again: the worker's
    // numbers are what the tests check, not its answer time.
    grpc::Status st;
    for (int attempt = 0; attempt < 3; ++attempt) {
      grpc::ClientContext ctx;
      rpc::SetTimeout(&ctx, std::chrono::seconds(10));
      rpc::WorkerStats stats;
      st = stub->Stats(&ctx, rpc::WorkerStatsRequest(), &stats);
      if (st.ok()) return stats;
      if (st.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED &&
          st.error_code() != grpc::StatusCode::UNAVAILABLE) {
        break;
      }
    }
    ADD_FAILURE() << w.name << ": " << st.error_message();
    return rpc::WorkerStats();
  }

  // Blocks fetched from the object store by all workers together.
  uint64_t TotalFetches() {
    uint64_t total = 0;
    for (const WorkerProcess& w : workers_) total += Stats(w).fetches();
    return total;
  }

  // Waits until the workers' disk tiers (which write behind) hold `n` blocks together; returns
  // how many they hold.
  uint64_t WaitForDiskBlocks(uint64_t n) {
    auto deadline = Clock::now() + std::chrono::seconds(30);
    uint64_t on_disk = 0;
    while (Clock::now() < deadline) {
      on_disk = 0;
      for (const WorkerProcess& w : workers_) {
        rpc::WorkerStats stats = Stats(w);
        if (stats.tiers_size() > 1) on_disk += stats.tiers(1).blocks();
      }
      if (on_disk >= n) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return on_disk;
  }

  // A cluster mount of the master at mountpoint_, in the foreground (a child of the test); returns
  // once /proc/mounts lists it. `extra_args` follow the mount's own; `extra_env` as ChildProcess.
  void Mount(const std::vector<std::string>& extra_args = {},
             const std::vector<std::string>& extra_env = {}) {
    std::vector<std::string> argv = {LAKECACHE_BINARY, "--log-level",   "info",     "mount",
                                     "--master",       master_address_, mountpoint_};
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    // No object-store credentials: a cluster client never needs them.
    std::vector<std::string> env = {"-AWS_ACCESS_KEY_ID", "-AWS_SECRET_ACCESS_KEY",
                                    "-AWS_SESSION_TOKEN", "-LAKECACHE_CREDENTIALS"};
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    auto started = ChildProcess::Start(argv, dir_->path() + "/mount.log", env);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    mount_ = std::move(started).value();
    auto deadline = Clock::now() + std::chrono::seconds(20);
    while (!IsMounted(mountpoint_)) {
      ASSERT_TRUE(mount_->Running() && Clock::now() < deadline)
          << "not mounted: " << mount_->LogTail();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  // The mount's server: the child of mount_, the process that holds the mount
  // (mount/mount_holder.h).
  pid_t MountServerPid() {
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (mount_ && Clock::now() < deadline) {
      std::ifstream in("/proc/" + std::to_string(mount_->pid()) + "/task/" +
                       std::to_string(mount_->pid()) + "/children");
      pid_t child = 0;
      if (in >> child) return child;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "the mount has no server";
    return 0;
  }

  void Unmount() {
    Status unmounted = UnmountForTest(mountpoint_);
    EXPECT_TRUE(unmounted.ok()) << unmounted.ToString();
    if (!mount_) return;
    auto deadline = Clock::now() + std::chrono::seconds(20);
    while (mount_->Running() && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    mount_.reset();
  }

  // The suite's s3rver: started (and filled) by the fixture's SetUpTestSuite, deleted by
  // TearDownTestSuite. One fixture of this kind per test program.
  static inline S3rver* server_ = nullptr;
  std::unique_ptr<TempDir> dir_;
  std::string config_;
  std::string mountpoint_;
  std::unique_ptr<ChildProcess> master_;
  std::string master_address_;
  // Set before StartMaster: the cluster's credentials folder (`lakecache cert`); the master gets
  // --credentials and the fixture's own calls go over TLS as the admin role.
  std::string credentials_;
  std::vector<std::string> master_args_;  // set before StartMaster: more flags for the master

  std::shared_ptr<const security::ClusterCredentials> Admin() const {
    if (credentials_.empty()) return nullptr;
    auto opened =
        security::ClusterCredentials::Open(credentials_, security::Role::kAdmin, "the test");
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    return opened.ok() ? *opened : nullptr;
  }
  std::vector<WorkerProcess> workers_;
  std::unique_ptr<ChildProcess> mount_;
};

}  // namespace lakecache::testing
