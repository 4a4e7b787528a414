// A cluster in one process: a MasterServer and WorkerServers on loopback over a file:// namespace,
// read through ClusterClient / ClusterStore and a FileSystem, as a cluster-mode mount reads it.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "cache/block_key.h"
#include "cluster_client/bulk_client.h"
#include "cluster_client/cluster_client.h"
#include "cluster_client/cluster_store.h"
#include "cluster_client/node_tier.h"
#include "fs/file_system.h"
#include "master/master_server.h"
#include "rpc/block_frame.h"
#include "rpc/bulk_protocol.h"
#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"
#include "rpc/lakecache.pb.h"
#include "rpc/tls.h"
#include "security/auth.h"
#include "security/credentials_dir.h"
#include "support/slowdown.h"
#include "support/test_servers.h"
#include "support/wait_for.h"
#include "ufs/fault_injecting_store.h"
#include "ufs/local_store.h"
#include "worker/object_writes.h"
#include "worker/worker_server.h"

namespace lakecache {
namespace {

using testing::TempDir;
using testing::WriteFile;
constexpr uint64_t kBlock = 4096;

std::string Pattern(size_t n, uint64_t seed) {
  std::string s(n, '\0');
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    s[i] = static_cast<char>(x);
  }
  return s;
}

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(data_.path() + "/dir/sub");
    files_["big.bin"] = Pattern(1024 * kBlock + 123, 1);  // 1,025 blocks, the last one short
    files_["dir/a.txt"] = "hello cluster\n";
    files_["dir/sub/b.bin"] = Pattern(3 * kBlock, 2);
    for (const auto& [path, content] : files_) {
      ASSERT_TRUE(WriteFile(data_.path() + "/" + path, content).ok());
    }
    config_.namespaces["lake"] = testing::LocalNamespace("lake", data_.path(), kBlock);
    config_.cluster.heartbeat_interval = std::chrono::milliseconds(100);
    // Workers must not miss it under a sanitizer's load either.
    config_.cluster.heartbeat_timeout = std::chrono::milliseconds(600) * testing::kSlowdown;
    store_options_.retries = false;
    MasterOptions master_options;
    master_options.listen = "127.0.0.1:0";
    master_options.store = store_options_;
    master_options.credentials = credentials_;
    auto master = MasterServer::Start(config_, master_options);
    ASSERT_TRUE(master.ok()) << master.status().ToString();
    master_ = std::move(*master);
    // Capacities 16, 16 and 32 MiB: the third worker should own half of the blocks.
    for (uint64_t mib : {16, 16, 32}) StartWorker(mib << 20);
    ConnectClient(/*replicas=*/true);
    WaitForWorkers(3);
  }

  // Every worker has the view the client has (the fake worker in it): each knows every owner.
  void WaitForPeerViews() {
    const uint64_t epoch = client_->epoch();
    for (const auto& w : workers_) {
      ASSERT_TRUE(testing::WaitFor([&] { return w->peer_epoch() >= epoch; }))
          << "a worker has no view of its peers as of epoch " << epoch;
    }
  }

  // The test's client; without `replicas` it reads each block from its owner, never through the
  // worker of its host (which all the in-process workers are).
  void ConnectClient(bool replicas) {
    ClusterClientOptions client_options;
    client_options.replicas = replicas;
    if (!credentials_.empty()) {
      auto opened =
          security::ClusterCredentials::Open(credentials_, security::Role::kClient, "the test");
      ASSERT_TRUE(opened.ok()) << opened.status().ToString();
      client_options.credentials = *opened;
    }
    auto client = ClusterClient::Connect(master_->address(), client_options);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = *client;
  }

  void StartWorker(uint64_t memory, const std::string& disk = "", bool shared_memory = true) {
    Config config = config_;
    config.cache.memory_capacity = memory;
    config.cache.policy = "lru";
    if (!disk.empty()) config.cache.disks.push_back({disk, 64 << 20, 0, 0});
    WorkerOptions options;
    options.master = master_->address();
    options.store = store_options_;
    options.shared_memory = shared_memory;
    options.credentials = credentials_;
    auto worker = WorkerServer::Start(config, options);
    ASSERT_TRUE(worker.ok()) << worker.status().ToString();
    workers_.push_back(std::move(*worker));
  }

  // Replaces the workers with one of `memory` bytes (and a disk tier in `disk`).
  void OnlyWorker(uint64_t memory, const std::string& disk = "", bool shared_memory = true) {
    for (auto& w : workers_) w->Shutdown();
    workers_.clear();
    StartWorker(memory, disk, shared_memory);
    // The new one alone: the view may still list the stopped ones until their heartbeats lapse.
    const std::string id = workers_.back()->id();
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          std::vector<ClusterWorker> view =
              client_->RefreshView().ok() ? client_->Workers() : std::vector<ClusterWorker>();
          return view.size() == 1 && view[0].id == id;
        },
        std::chrono::seconds(10) * testing::kSlowdown))
        << "the view never had the new worker alone";
  }

  void WaitForWorkers(size_t n) {
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(10) * testing::kSlowdown;
    while (std::chrono::steady_clock::now() < deadline) {
      ASSERT_TRUE(client_->RefreshView().ok());
      if (client_->Workers().size() == n) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polls the view
    }
    FAIL() << "the view never had " << n << " workers";
  }

  ClusterNamespace Namespace() const {
    for (const ClusterNamespace& ns : client_->namespaces()) {
      if (ns.name == "lake") return ns;
    }
    ADD_FAILURE() << "no namespace 'lake'";
    return {};
  }

  std::string ReadAll(ObjectStore& store, const std::string& key, size_t size) {
    std::string out(size, '\0');
    ReadOptions options;
    Result<size_t> n = store.Read(key, 0, std::span<char>(out.data(), out.size()), options);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    out.resize(n.ok() ? *n : 0);
    return out;
  }

  TempDir data_;
  std::string credentials_;  // set before SetUp: a cluster with credentials (security/auth.h)
  Config config_;
  StoreOptions store_options_;
  std::map<std::string, std::string> files_;
  std::unique_ptr<MasterServer> master_;
  std::vector<std::unique_ptr<WorkerServer>> workers_;
  std::shared_ptr<ClusterClient> client_;
};

TEST_F(ClusterTest, NamespacesListingsAndAttributesComeFromTheMaster) {
  ClusterNamespace ns = Namespace();
  EXPECT_EQ(ns.block_size, kBlock);
  EXPECT_EQ(ns.key_prefix, "");
  ClusterStore store(client_, ns);
  Result<ListResult> root = ListAll(store, "", "/", {});
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  ASSERT_EQ(root->objects.size(), 1u);
  EXPECT_EQ(root->objects[0].key, "big.bin");
  EXPECT_EQ(root->objects[0].size, files_["big.bin"].size());
  EXPECT_EQ(root->common_prefixes, std::vector<std::string>{"dir/"});
  // Page by page (a folder too big for one message): the same entries, in name order.
  ListRequest one;
  one.delimiter = "/";
  one.max_keys = 1;
  Result<ListPage> first = store.List(one, {});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(first->truncated);
  ASSERT_EQ(first->objects.size(), 1u);
  EXPECT_EQ(first->objects[0].key, "big.bin");
  one.continuation_token = first->next_token;
  Result<ListPage> second = store.List(one, {});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_FALSE(second->truncated);
  EXPECT_TRUE(second->objects.empty());
  EXPECT_EQ(second->common_prefixes, std::vector<std::string>{"dir/"});
  Result<ListResult> sub = ListAll(store, "dir/", "/", {});
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  ASSERT_EQ(sub->objects.size(), 1u);
  EXPECT_EQ(sub->objects[0].key, "dir/a.txt");
  EXPECT_EQ(sub->common_prefixes, std::vector<std::string>{"dir/sub/"});
  Result<ObjectInfo> head = store.Head("dir/sub/b.bin", {});
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(head->size, 3 * kBlock);
  EXPECT_EQ(store.Head("dir/missing", {}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store.Head("dir", {}).status().code(), StatusCode::kNotFound);  // a folder
  EXPECT_EQ(ListAll(store, "", "", {}).status().code(), StatusCode::kUnimplemented);
}

TEST_F(ClusterTest, ReadsAreExactAndBlocksSpreadByCapacity) {
  ClusterStore store(client_, Namespace());
  for (const auto& [key, content] : files_) {
    EXPECT_EQ(ReadAll(store, key, content.size() + 10), content) << key;
  }
  // A range across two blocks, and one past the end.
  const std::string& big = files_["big.bin"];
  std::string range(3 * kBlock, '\0');
  Result<size_t> n = store.Read("big.bin", kBlock - 5, std::span<char>(range), {});
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(range, big.substr(kBlock - 5, 3 * kBlock));
  EXPECT_EQ(*store.Read("big.bin", big.size() + 1, std::span<char>(range), {}), 0u);

  uint64_t total = 0;
  std::vector<uint64_t> held;
  for (const auto& w : workers_) {
    held.push_back(w->blocks().Stats().tiers[0].blocks);
    total += held.back();
  }
  EXPECT_EQ(total, 1025u + 1 + 3);  // every block once, on exactly one worker
  double expected[] = {0.25, 0.25, 0.5};
  for (size_t i = 0; i < held.size(); ++i) {
    double share = double(held[i]) / double(total);
    EXPECT_NEAR(share, expected[i], expected[i] * 0.2) << "worker " << i << " holds " << held[i];
  }
  // A second read is served from the workers' caches: no new fetch anywhere.
  uint64_t fetches = 0;
  for (const auto& w : workers_) fetches += w->blocks().Stats().fetches;
  EXPECT_EQ(ReadAll(store, "big.bin", big.size()), big);
  uint64_t again = 0;
  for (const auto& w : workers_) again += w->blocks().Stats().fetches;
  EXPECT_EQ(again, fetches);
  // Every block came over the workers' bulk data path (the default transport), none over gRPC.
  EXPECT_GE(client_->bulk_reads(), 1025u + 1 + 3);
  EXPECT_EQ(client_->streamed_reads(), 0u);
}

TEST_F(ClusterTest, GrpcTransportStillReadsEveryBlock) {
  ClusterClientOptions options;
  options.transport = ClusterClientOptions::Transport::kGrpc;
  auto client = ClusterClient::Connect(master_->address(), options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  ClusterStore store(*client, Namespace());
  for (const auto& [key, content] : files_) {
    EXPECT_EQ(ReadAll(store, key, content.size()), content) << key;
  }
  EXPECT_GE((*client)->streamed_reads(), 1025u + 1 + 3);
  EXPECT_EQ((*client)->bulk_reads(), 0u);
}

TEST_F(ClusterTest, AFailedWorkerIsMarkedDownAndItsBlocksReadFromTheNext) {
  ClusterStore store(client_, Namespace());
  const std::string& big = files_["big.bin"];
  ASSERT_EQ(ReadAll(store, "big.bin", big.size()), big);
  std::string dead_id = workers_[2]->id();
  workers_[2]->Shutdown();  // the biggest: half of the blocks lose their owner
  // Read until a block of the stopped worker has been asked for (the first one is at most a few
  // blocks in), then look before the master's view drops it.
  bool marked = false;
  for (uint64_t at = 0; at < big.size() && !marked; at += kBlock) {
    char buf[16];
    Result<size_t> n = store.Read("big.bin", at, buf, {});
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    ASSERT_EQ(std::string(buf, *n), big.substr(at, 16));
    for (const ClusterWorker& w : client_->Workers()) {
      if (w.id == dead_id) marked = w.down;
    }
  }
  EXPECT_TRUE(marked) << "the client did not mark the stopped worker down";
  EXPECT_EQ(ReadAll(store, "big.bin", big.size()), big);
  // The master drops it once its heartbeats stop.
  testing::WaitFor([&] { return client_->RefreshView().ok() && client_->Workers().size() == 2; });
  EXPECT_EQ(client_->Workers().size(), 2u);
  EXPECT_EQ(ReadAll(store, "big.bin", big.size()), big);
}

// A worker on the bulk path that dies in the middle of a block (it sends the reply header and
// half of the bytes, then its connection closes), or that stops sending, or that accepts
// connections and never reads a byte of them (a stopped process, or one cut off from this client
// but not from the master), registered with a capacity that makes it the owner of nearly every
// block. It heartbeats until destroyed.
class DyingBulkWorker {
 public:
  // kGated: the right bytes (bytes_of) with their digest, half of them at once and the rest once
  // the test calls Release().
  enum class Mode { kDieMidBlock, kStallMidBlock, kSilent, kGated };
  using BytesOf = std::function<std::string(const rpc::BlockReadRequest&)>;
  DyingBulkWorker(const std::string& master, Mode mode, BytesOf bytes_of = nullptr)
      : mode_(mode), bytes_of_(std::move(bytes_of)) {
    auto listener = rpc::ListenTcp("127.0.0.1:0");
    EXPECT_TRUE(listener.ok()) << listener.status().ToString();
    listen_fd_ = listener->fd;
    info_.set_id("dying");
    info_.set_address("127.0.0.1:1");  // gRPC: never used by a bulk client
    info_.set_data_address(listener->address);
    info_.set_capacity_bytes(1ull << 50);
    info_.set_start_time_ms(1);
    acceptor_ = std::thread([this] { Accept(); });
    auto stub = rpc::MasterService::NewStub(rpc::OpenChannel(master));
    heartbeat_ = std::thread([this, stub = std::shared_ptr(std::move(stub))] {
      for (bool first = true; !stop_; first = false) {
        grpc::ClientContext ctx;
        rpc::SetTimeout(&ctx, std::chrono::milliseconds(1000));
        if (first) {
          rpc::RegisterRequest req;
          rpc::RegisterResponse resp;
          *req.mutable_worker() = info_;
          EXPECT_TRUE(stub->Register(&ctx, req, &resp).ok());
        } else {
          rpc::HeartbeatRequest req;
          rpc::HeartbeatResponse resp;
          *req.mutable_worker() = info_;
          (void)stub->Heartbeat(&ctx, req, &resp);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
  }
  ~DyingBulkWorker() {
    Release();
    stop_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    acceptor_.join();
    {
      std::lock_guard<std::mutex> lock(gate_mu_);
      for (auto& conn : gated_) conn->Abort();
    }
    for (std::thread& t : gated_threads_) t.join();
    heartbeat_.join();
    ::close(listen_fd_);
  }
  int requests() const { return requests_.load(); }
  // kGated: waits (a minute at most) until half of a block has been sent; then lets the rest go.
  bool WaitHalfSent() {
    std::unique_lock<std::mutex> lock(gate_mu_);
    return gate_cv_.wait_for(lock, std::chrono::minutes(1), [&] { return half_sent_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(gate_mu_);
    released_ = true;
    gate_cv_.notify_all();
  }

 private:
  void Accept() {
    auto forever = std::chrono::steady_clock::now() + std::chrono::hours(1);
    std::vector<std::unique_ptr<rpc::BulkConnection>> stalled;  // closed when the test ends
    for (;;) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      auto conn = rpc::BulkConnection::Accept(fd, "client", nullptr, forever);
      if (!conn.ok()) continue;
      if (mode_ == Mode::kGated) {  // each connection served apart: pings are answered meanwhile
        std::lock_guard<std::mutex> lock(gate_mu_);
        gated_.push_back(std::shared_ptr(std::move(*conn)));
        gated_threads_.emplace_back(
            [this, c = gated_.back(), forever] { ServeGated(*c, forever); });
        continue;
      }
      if (mode_ == Mode::kSilent) {
        ++requests_;  // connections, here
        stalled.push_back(std::move(*conn));
        continue;
      }
      bool closed = false;
      auto request = rpc::NextRequest(**conn, forever, &closed);
      if (!request.ok()) continue;
      ++requests_;
      std::string header = rpc::EncodeReplyHeader(Status::Ok(), request->length);
      std::string half(request->length / 2, 'X');  // bytes a reader must never keep
      std::span<const char> pieces[] = {header, half};
      (void)(*conn)->WriteAll(pieces, forever);
      if (mode_ == Mode::kStallMidBlock) stalled.push_back(std::move(*conn));
    }
  }

  void ServeGated(rpc::BulkConnection& conn, std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      bool closed = false;
      auto request = rpc::NextRequest(conn, deadline, &closed);
      if (!request.ok()) return;
      if (rpc::IsPing(*request)) {
        if (!rpc::SendReply(conn, Status::Ok(), {}, deadline).ok()) return;
        continue;
      }
      ++requests_;
      SendGated(conn, *request, deadline);
    }
  }
  void SendGated(rpc::BulkConnection& conn, const rpc::BlockReadRequest& request,
                 std::chrono::steady_clock::time_point deadline) {
    const std::string bytes = bytes_of_(request);
    std::string header =
        rpc::EncodeReplyHeader(Status::Ok(), bytes.size(), XXH3_64bits(bytes.data(), bytes.size()));
    const std::span<const char> all(bytes);
    std::span<const char> first[] = {header, all.first(bytes.size() / 2)};
    if (!conn.WriteAll(first, deadline).ok()) return;
    {
      std::unique_lock<std::mutex> lock(gate_mu_);
      half_sent_ = true;
      gate_cv_.notify_all();
      gate_cv_.wait(lock, [&] { return released_; });
    }
    std::span<const char> rest[] = {all.subspan(bytes.size() / 2)};
    (void)conn.WriteAll(rest, deadline);
  }

  const Mode mode_;
  const BytesOf bytes_of_;
  std::mutex gate_mu_;
  std::condition_variable gate_cv_;
  bool half_sent_ = false;
  bool released_ = false;
  std::vector<std::shared_ptr<rpc::BulkConnection>> gated_;
  std::vector<std::thread> gated_threads_;
  rpc::WorkerInfo info_;
  int listen_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread acceptor_, heartbeat_;
};

TEST_F(ClusterTest, AWorkerDyingMidBlockOnTheBulkPathFailsOverWithCorrectBytes) {
  ConnectClient(/*replicas=*/false);  // the client itself meets the failing owner
  DyingBulkWorker dying(master_->address(), DyingBulkWorker::Mode::kDieMidBlock);
  WaitForWorkers(4);
  ClusterStore store(client_, Namespace());
  const std::string& big = files_["big.bin"];
  EXPECT_EQ(ReadAll(store, "big.bin", big.size()), big);
  EXPECT_GE(dying.requests(), 1);  // it owned blocks, and failed the first it was asked for
  bool down = false;
  for (const ClusterWorker& w : client_->Workers()) down |= w.id == "dying" && w.down;
  EXPECT_TRUE(down) << "the client did not mark the dying worker down";
}

TEST_F(ClusterTest, AStuckWorkerCostsAReaderNoMoreThanItsDeadline) {
  ConnectClient(/*replicas=*/false);  // the client itself meets the failing owner
  DyingBulkWorker stuck(master_->address(), DyingBulkWorker::Mode::kStallMidBlock);
  WaitForWorkers(4);
  ClusterStore store(client_, Namespace());
  Result<ObjectInfo> head = store.Head("big.bin", {});
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  // A block the stuck worker owns (nearly all of them do).
  ContentId content = MakeContentId("lake", "big.bin", head->etag, kBlock);
  uint64_t index = 0;
  while (client_->PlacementOrder(StableKeyHash(BlockKey{content, index}))[0] != "dying" &&
         index < 100) {
    ++index;
  }
  constexpr auto kDeadline = std::chrono::milliseconds(500);
  auto start = std::chrono::steady_clock::now();
  ReadOptions options;
  options.deadline = start + kDeadline;
  std::string buf(kBlock, '\0');
  Result<size_t> n = store.Read("big.bin", index * kBlock, std::span<char>(buf), options);
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(n.ok()) << "read the block although its owner never finished sending it";
  // It ended at its deadline (the cause, and not before it), not in a hang.
  EXPECT_EQ(n.status().code(), StatusCode::kDeadlineExceeded) << n.status().ToString();
  EXPECT_GE(took, kDeadline);
  EXPECT_LT(took, testing::kWaitTimeout);
  EXPECT_EQ(stuck.requests(), 1);
}

// A worker that goes silent (its connections accepted, never answered) while the master still
// sees its heartbeats: the first read waiting on it pings it, gets no answer and fails over, so
// the reader waits seconds, not its deadline; every byte is right and the worker is marked down.
TEST_F(ClusterTest, ASilentWorkerIsPingedAndItsReadsFailOverWithinSeconds) {
  ConnectClient(/*replicas=*/false);  // the client itself meets the silent owner
  DyingBulkWorker silent(master_->address(), DyingBulkWorker::Mode::kSilent);
  WaitForWorkers(4);
  ClusterStore store(client_, Namespace());
  const std::string& big = files_["big.bin"];
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ReadAll(store, "big.bin", big.size()), big);
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(silent.requests(), 1) << "the silent worker owned no block";
  EXPECT_GE(client_->silent_workers(), 1u);
  // One probe_after, one probe_timeout and the reads from the others; a second round once the
  // down mark lapses at most.
  EXPECT_LT(took, std::chrono::seconds(8) * testing::kSlowdown)
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  bool down = false;
  for (const ClusterWorker& w : client_->Workers()) down |= w.id == "dying" && w.down;
  EXPECT_TRUE(down) << "the client did not mark the silent worker down";
}

// Read through the host's worker (replicas), which asks the owner: an owner that fails mid-block
// or goes silent costs the read seconds at most, and the host's worker gets the block from the
// store, every byte right.
TEST_F(ClusterTest, AReplicaReadWhoseOwnerDiesMidBlockGetsTheBlockFromTheStore) {
  DyingBulkWorker dying(master_->address(), DyingBulkWorker::Mode::kDieMidBlock);
  WaitForWorkers(4);
  ASSERT_NO_FATAL_FAILURE(WaitForPeerViews());
  ClusterStore store(client_, Namespace());
  const std::string& big = files_["big.bin"];
  EXPECT_EQ(ReadAll(store, "big.bin", big.size()), big);
  EXPECT_GE(dying.requests(), 1) << "no worker asked the dying owner";
  EXPECT_GE(client_->replica_reads(), 1u);
}

TEST_F(ClusterTest, AReplicaReadWhoseOwnerIsSilentGetsTheBlockFromTheStoreWithinSeconds) {
  DyingBulkWorker silent(master_->address(), DyingBulkWorker::Mode::kSilent);
  WaitForWorkers(4);
  ASSERT_NO_FATAL_FAILURE(WaitForPeerViews());
  ClusterStore store(client_, Namespace());
  const std::string& big = files_["big.bin"];
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ReadAll(store, "big.bin", big.size()), big);
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(silent.requests(), 1) << "no worker asked the silent owner";
  uint64_t found_silent = 0;
  for (const auto& w : workers_) found_silent += w->peer_reads().silent_peers;
  EXPECT_GE(found_silent, 1u);
  EXPECT_LT(took, std::chrono::seconds(8) * testing::kSlowdown)
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
}

// Counts the bytes of a read as they land, for a test to wait on.
class LandedBytes final : public rpc::ReadProgress {
 public:
  void Landed(uint64_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    landed_ = bytes;
    cv_.notify_all();
  }
  bool WaitFor(uint64_t bytes, std::chrono::seconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return landed_ >= bytes; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t landed_ = 0;
};

// A worker receiving a block from its owner passes it on to the next worker the owner sent to
// it as the bytes land, not once it has them all: the owner here sends half a block and holds
// the rest, and the next worker has that half already.
TEST_F(ClusterTest, AWorkerPassesOnABlockItIsReceivingAsItsBytesLand) {
  const std::string& big = files_["big.bin"];
  DyingBulkWorker owner(
      master_->address(), DyingBulkWorker::Mode::kGated,
      [&](const rpc::BlockReadRequest& r) { return big.substr(r.block.index() * kBlock, kBlock); });
  WaitForWorkers(4);
  ASSERT_NO_FATAL_FAILURE(WaitForPeerViews());
  ClusterStore store(client_, Namespace());
  Result<ObjectInfo> head = store.Head("big.bin", {});
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  rpc::BlockReadRequest request;
  request.block.set_ns("lake");
  request.block.set_key("big.bin");
  request.block.set_etag(head->etag);
  request.block.set_object_size(big.size());
  request.block.set_block_size(kBlock);
  request.block.set_index(7);
  request.length = kBlock;
  const std::string want = big.substr(7 * kBlock, kBlock);
  WorkerServer& holder = *workers_[0];
  auto deadline = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(30); };
  auto connect = [&] {
    auto conn = rpc::BulkConnection::Connect(holder.data_address(), nullptr, "", deadline());
    EXPECT_TRUE(conn.ok()) << conn.status().ToString();
    return conn.ok() ? std::move(*conn) : nullptr;
  };
  // As a mount of its host would: the holder gets the block from its owner, the gated worker.
  std::string replica(kBlock, '\0');
  std::thread mount([&] {
    auto conn = connect();
    if (conn == nullptr) return;
    rpc::BlockReadRequest ask = request;
    ask.flags = rpc::kReadAsReplica;
    auto reply = rpc::CallRead(*conn, ask, replica, deadline());
    EXPECT_TRUE(reply.ok() && reply->status.ok());
  });
  struct Joined {  // also when an assertion ends the test early
    DyingBulkWorker& owner;
    std::thread& mount;
    void Join() {
      owner.Release();
      if (mount.joinable()) mount.join();
    }
    ~Joined() { Join(); }
  } joined{owner, mount};
  ASSERT_TRUE(owner.WaitHalfSent()) << "the holder did not ask the owner";
  // As a worker the owner sent to the holder would: what it holds or is receiving.
  auto conn = connect();
  ASSERT_NE(conn, nullptr);
  rpc::BlockReadRequest held = request;
  held.flags = rpc::kReadForReplica | rpc::kReadHeldOnly;
  held.requester = "another";
  std::string got(kBlock, '\0');
  LandedBytes landed;
  Result<rpc::BlockReplyHeader> reply = Status::Internal("not read");
  std::thread next([&] { reply = rpc::CallRead(*conn, held, got, deadline(), &landed); });
  // While the owner holds the second half.
  EXPECT_TRUE(landed.WaitFor(kBlock / 2, std::chrono::seconds(20) * testing::kSlowdown))
      << "the holder waited for the whole block";
  EXPECT_EQ(got.substr(0, kBlock / 2), want.substr(0, kBlock / 2));
  owner.Release();
  next.join();
  joined.Join();  // the holder's own read, done before its bytes are looked at
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_TRUE(reply->status.ok()) << reply->status.ToString();
  EXPECT_EQ(got, want);
  EXPECT_EQ(replica, want);
}

// A credentials folder of a new CA (ca.crt, ca.key, the master's certificate, role tokens).
std::string MakeCredentials(const TempDir& dir) {
  Status made = security::MakeCredentials(dir.path());
  EXPECT_TRUE(made.ok()) << made.ToString();
  return dir.path();
}

// The same cluster with credentials: TLS on every connection, role tokens on every call, each
// worker with a certificate of its own from the master.
class ClusterTlsTest : public ClusterTest {
 protected:
  void SetUp() override {
    credentials_ = MakeCredentials(dir_);
    ClusterTest::SetUp();
  }

  // A connection to worker 0's bulk path: TLS trusting `ca` (empty: plain text).
  Result<std::unique_ptr<rpc::BulkConnection>> Connect(const std::string& ca) {
    std::shared_ptr<const rpc::TlsContext> tls;
    if (!ca.empty()) {
      LC_ASSIGN_OR_RETURN(tls, rpc::TlsContext::Client(ca));
    }
    return rpc::BulkConnection::Connect(
        workers_[0]->data_address(), tls.get(), security::WorkerTlsName(workers_[0]->id()),
        std::chrono::steady_clock::now() + std::chrono::seconds(5) * testing::kSlowdown);
  }

  Result<size_t> ReadB(const std::shared_ptr<ClusterClient>& client, std::string* out) {
    ClusterStore store(client, Namespace());
    out->assign(files_["dir/sub/b.bin"].size(), '\0');
    return store.Read("dir/sub/b.bin", 0, std::span<char>(*out), {});
  }

  TempDir dir_;
};

TEST_F(ClusterTlsTest, BulkReadsAreExactWithTlsOn) {
  std::string got;
  Result<size_t> n = ReadB(client_, &got);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(got, files_["dir/sub/b.bin"]);
  EXPECT_EQ(client_->bulk_reads(), 3u);
  EXPECT_EQ(client_->streamed_reads(), 0u);
}

TEST_F(ClusterTlsTest, ABulkClientOfAnotherCaIsRefused) {
  TempDir other;
  auto c = Connect(MakeCredentials(other) + "/ca.crt");
  ASSERT_FALSE(c.ok()) << "a TLS handshake with a worker whose certificate our CA did not sign";
  EXPECT_NE(c.status().message().find("TLS handshake"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("certificate verify failed"), std::string::npos)
      << c.status().message();
}

// A bulk connection must start with the client role's token: none, an unknown one and another
// role's are refused with the role named, never the token; the client's own is accepted.
TEST_F(ClusterTlsTest, ABulkConnectionNeedsTheClientOrWorkerRolesToken) {
  auto deadline = [] {
    return std::chrono::steady_clock::now() + std::chrono::seconds(5) * testing::kSlowdown;
  };
  {
    auto c = Connect(credentials_ + "/ca.crt");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    rpc::BlockReadRequest request;
    std::string buf(16, '\0');
    auto reply = rpc::CallRead(**c, request, buf, deadline());
    ASSERT_FALSE(reply.ok() && reply->status.ok()) << "served a read without a hello";
  }
  std::string admin = *security::ClusterCredentials::Open(credentials_, security::Role::kAdmin, "t")
                           .value()
                           ->Token();
  std::string client =
      *security::ClusterCredentials::Open(credentials_, security::Role::kClient, "t")
           .value()
           ->Token();
  // A worker reads its peers' blocks for the replicas it keeps.
  std::string worker =
      *security::ClusterCredentials::Open(credentials_, security::Role::kWorker, "t")
           .value()
           ->Token();
  struct Case {
    std::string token;
    StatusCode code;
    std::string says;
  };
  for (const Case& k : {Case{"", StatusCode::kUnauthenticated, "carried no token"},
                        Case{std::string(64, 'a'), StatusCode::kUnauthenticated, "not one of"},
                        Case{admin, StatusCode::kAccessDenied, "is the admin role's"},
                        Case{client, StatusCode::kOk, ""}, Case{worker, StatusCode::kOk, ""}}) {
    auto c = Connect(credentials_ + "/ca.crt");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    Status hello = rpc::CallHello(**c, k.token, deadline());
    EXPECT_EQ(hello.code(), k.code) << hello.ToString();
    EXPECT_NE(hello.message().find(k.says), std::string::npos) << hello.message();
    if (!k.token.empty()) {
      EXPECT_EQ(hello.message().find(k.token), std::string::npos);
    }
    if (!hello.ok()) {
      EXPECT_NE(hello.message().find("needs the worker or client role"), std::string::npos);
    }
  }
}

// Reads between workers (the replica flags) shape an owner's book of holders: a mount's token may
// not send them, a worker's may.
TEST_F(ClusterTlsTest, OnlyAWorkersTokenMayReadAsAWorker) {
  auto deadline = [] {
    return std::chrono::steady_clock::now() + std::chrono::seconds(5) * testing::kSlowdown;
  };
  ClusterStore store(client_, Namespace());
  Result<ObjectInfo> head = store.Head("dir/sub/b.bin", {});
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  rpc::BlockReadRequest request;
  request.block.set_ns("lake");
  request.block.set_key("dir/sub/b.bin");
  request.block.set_etag(head->etag);
  request.block.set_object_size(head->size);
  request.block.set_block_size(kBlock);
  request.length = kBlock;
  for (security::Role role : {security::Role::kClient, security::Role::kWorker}) {
    for (int flags : std::initializer_list<int>{rpc::kReadForReplica,
                                                rpc::kReadForReplica | rpc::kReadNoRedirect,
                                                rpc::kReadForReplica | rpc::kReadHeldOnly}) {
      auto c = Connect(credentials_ + "/ca.crt");
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      auto credentials = security::ClusterCredentials::Open(credentials_, role, "t");
      ASSERT_TRUE(credentials.ok());
      ASSERT_TRUE(rpc::CallHello(**c, *(*credentials)->Token(), deadline()).ok());
      rpc::BlockReadRequest ask = request;
      ask.flags = static_cast<uint8_t>(flags);
      ask.requester = "someone";
      std::string buf(kBlock, '\0');
      auto reply = rpc::CallRead(**c, ask, buf, deadline());
      ASSERT_TRUE(reply.ok()) << reply.status().ToString();
      if (role == security::Role::kClient) {
        EXPECT_EQ(reply->status.code(), StatusCode::kAccessDenied) << flags;
        EXPECT_NE(reply->status.message().find("worker role"), std::string::npos)
            << reply->status.ToString();
      } else {
        EXPECT_NE(reply->status.code(), StatusCode::kAccessDenied) << reply->status.ToString();
      }
    }
  }
}

// A client that connects and never says anything (no TLS handshake) does not hold up a worker's
// shutdown: the handshake would wait 10 s.
TEST_F(ClusterTlsTest, ASilentClientDoesNotDelayShutdown) {
  auto start = std::chrono::steady_clock::now();
  auto silent = rpc::BulkConnection::Connect(workers_[0]->data_address(), nullptr, "",
                                             start + std::chrono::seconds(5) * testing::kSlowdown);
  ASSERT_TRUE(silent.ok()) << silent.status().ToString();
  // One acceptor takes connections in order: once a second one has been served, the silent one
  // was accepted before it and its thread started, to wait for the handshake.
  std::string token =
      *security::ClusterCredentials::Open(credentials_, security::Role::kClient, "t")
           .value()
           ->Token();
  auto served = Connect(credentials_ + "/ca.crt");
  ASSERT_TRUE(served.ok()) << served.status().ToString();
  Status hello =
      rpc::CallHello(**served, token, std::chrono::steady_clock::now() + testing::kWaitTimeout);
  ASSERT_TRUE(hello.ok()) << hello.ToString();
  workers_[0]->Shutdown();
  // A shutdown that waited for the silent client ended no sooner than 10 s after its accept.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST_F(ClusterTlsTest, APlainTextClientIsRefusedWithAClearError) {
  auto c = Connect("");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  rpc::BlockReadRequest request;
  std::string buf(16, '\0');
  auto reply =
      rpc::CallRead(**c, request, buf, std::chrono::steady_clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->status.code(), StatusCode::kAccessDenied) << reply->status.ToString();
  EXPECT_NE(reply->status.message().find("requires TLS"), std::string::npos)
      << reply->status.message();
}

// Many readers share a BulkClient's few connections: never more are open than its bound, and
// every read is exact; a worker's answer (a bad request) keeps its code and the connection.
TEST_F(ClusterTest, BulkClientReadersShareABoundedPoolOfConnections) {
  ClusterStore store(client_, Namespace());
  Result<ObjectInfo> head = store.Head("big.bin", {});
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  BulkClient bulk(workers_[0]->data_address(), BulkClientOptions{2, nullptr, "", nullptr});
  const std::string& big = files_["big.bin"];
  std::atomic<size_t> most_open{0};
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 8; ++r) {
    readers.emplace_back([&, r] {
      for (uint64_t index = r; index < 200; index += 8) {
        rpc::BlockId id;
        id.set_ns("lake");
        id.set_key("big.bin");
        id.set_etag(head->etag);
        id.set_object_size(big.size());
        id.set_block_size(kBlock);
        id.set_index(index);
        std::string buf(kBlock, '\0');
        Result<size_t> n =
            bulk.ReadBlock(id, 0, std::span<char>(buf),
                           std::chrono::steady_clock::now() + std::chrono::seconds(30));
        if (!n.ok() || buf != big.substr(index * kBlock, kBlock)) ++bad;
        size_t open = bulk.open_connections();
        for (size_t m = most_open; open > m && !most_open.compare_exchange_weak(m, open);) continue;
      }
    });
  }
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_LE(most_open.load(), 2u);
  EXPECT_GE(most_open.load(), 1u);
  rpc::BlockId past;
  past.set_ns("lake");
  past.set_key("big.bin");
  past.set_object_size(big.size());
  past.set_block_size(kBlock);
  past.set_index(100000);
  char buf[16];
  size_t open = bulk.open_connections();
  Result<size_t> n =
      bulk.ReadBlock(past, 0, buf, std::chrono::steady_clock::now() + std::chrono::seconds(5));
  EXPECT_EQ(n.status().code(), StatusCode::kInvalidArgument) << n.status().ToString();
  EXPECT_EQ(bulk.open_connections(), open) << "an answer dropped its connection";
  // A worker answers a ping on a connection of its own, outside the pool.
  Status ping = bulk.Probe(std::chrono::steady_clock::now() + std::chrono::seconds(5));
  EXPECT_TRUE(ping.ok()) << ping.ToString();
  EXPECT_EQ(bulk.open_connections(), open);
  EXPECT_EQ(bulk.OldestRequest(), std::chrono::steady_clock::time_point::max());
}

TEST_F(ClusterTest, WorkersRefuseKeysOutsideTheirNamespaces) {
  rpc::BlockId id;
  id.set_ns("nope");
  id.set_key("big.bin");
  id.set_object_size(10);
  id.set_block_size(kBlock);
  char buf[10];
  Result<size_t> n = client_->ReadBlock(id, 0, buf, Clock::time_point::max());
  EXPECT_EQ(n.status().code(), StatusCode::kNotFound);
  EXPECT_NE(n.status().message().find("unknown namespace 'nope'"), std::string::npos)
      << n.status().message();
  id.set_ns("lake");
  id.set_block_size(0);
  EXPECT_EQ(client_->ReadBlock(id, 0, buf, Clock::time_point::max()).status().code(),
            StatusCode::kInvalidArgument);
}

// Found by fuzz/proto_fuzz: Resolve checked index * block_size against the object's size, and the
// product wraps: block 2^52 of 4 KiB blocks was "offset 0", read and cached as block 2^52.
TEST_F(ClusterTest, ABlockIndexWhoseOffsetWrapsPast2To64IsRefused) {
  rpc::BlockId id;
  id.set_ns("lake");
  id.set_key("big.bin");
  id.set_object_size(files_["big.bin"].size());
  id.set_block_size(kBlock);
  id.set_index(uint64_t{1} << 52);  // * 4096 = 2^64
  char buf[16];
  Result<size_t> n = client_->ReadBlock(id, 0, buf, Clock::time_point::max());
  EXPECT_EQ(n.status().code(), StatusCode::kInvalidArgument) << n.status().ToString();
}

// Found by fuzz/proto_fuzz: an empty body (a new empty file) has no buffer, and copying its zero
// bytes passed a null pointer to memcpy: undefined, and fatal to a worker built with UBSan.
TEST(ObjectWritesTest, AnEmptyBodyIsWritten) {
  TempDir data;
  std::vector<NamespaceTable::Source> sources(1);
  sources[0].config.name = "lake";
  sources[0].store = std::make_shared<LocalStore>(data.path());
  std::unique_ptr<NamespaceTable> namespaces = NamespaceTable::FromStores(std::move(sources));
  ObjectWrites writes(namespaces.get(), 1 << 20);
  rpc::WriteBodyChunk first;
  first.set_ns("lake");
  first.set_key("empty.txt");
  Result<rpc::WrittenObject> written =
      writes.Body(first, [](rpc::WriteBodyChunk*) { return false; });
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(written->size(), 0u);
  EXPECT_EQ(std::filesystem::file_size(data.path() + "/empty.txt"), 0u);
}

// A FileSystem reading namespace "lake" through the cluster, as a cluster mount builds it.
std::unique_ptr<FileSystem> ClusterFileSystem(const std::shared_ptr<ClusterClient>& client,
                                              const ClusterNamespace& ns, FileSystemOptions options,
                                              bool node_tiers = true,
                                              uint64_t memory_capacity = 1 << 20) {
  NamespaceTable::Source source;
  source.config.name = ns.name;
  source.config.block_size = ns.block_size;
  source.config.metadata_ttl = ns.metadata_ttl;
  source.prefix = ns.key_prefix;
  source.store = std::make_shared<ClusterStore>(client, ns);
  std::vector<NamespaceTable::Source> sources;
  sources.push_back(std::move(source));
  CacheConfig cache;
  cache.memory_capacity = memory_capacity;
  options.max_run_blocks = 1;
  auto blocks = ClusterBlockStore(client, cache, node_tiers, nullptr);
  if (!blocks.ok()) return nullptr;
  return std::make_unique<FileSystem>(NamespaceTable::FromStores(std::move(sources)),
                                      std::move(*blocks), options);
}

// Opens lake/big.bin of `fs`.
void OpenBig(FileSystem& fs, OpenedFile* opened) {
  Result<FileAttr> lake = fs.Lookup(1, "lake");
  ASSERT_TRUE(lake.ok()) << lake.status().ToString();
  Result<FileAttr> file = fs.Lookup(lake->ino, "big.bin");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  Result<OpenedFile> got = fs.Open(file->ino);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  *opened = *got;
}

TEST_F(ClusterTest, FileSystemReadsThroughTheCluster) {
  std::unique_ptr<FileSystem> made = ClusterFileSystem(client_, Namespace(), FileSystemOptions{});
  ASSERT_NE(made, nullptr);
  FileSystem& fs = *made;
  OpenedFile opened;
  ASSERT_NO_FATAL_FAILURE(OpenBig(fs, &opened));
  const std::string& big = files_["big.bin"];
  std::string got(big.size(), '\0');
  for (size_t at = 0; at < big.size();) {  // sequential 128 KiB reads, as FUSE sends them
    size_t want = std::min<size_t>(128 << 10, big.size() - at);
    Result<size_t> n = fs.Read(opened.fh, at, std::span<char>(got.data() + at, want));
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    ASSERT_GT(*n, 0u);
    at += *n;
  }
  fs.Release(opened.fh);
  EXPECT_EQ(got, big);
}

// Random reads in cluster mode move only the range read: the first touch of a block is a range
// read from its worker (nothing cached in the mount); a block read again is fetched whole.
TEST_F(ClusterTest, RandomReadersReadRangesUntilABlockIsReadAgain) {
  ConnectClient(/*replicas=*/false);  // each range from its owner, not through this host's worker
  FileSystemOptions options;
  options.range_reads_when_random = true;
  // The workers' memory not mapped: as a mount on another host reads them.
  std::unique_ptr<FileSystem> made = ClusterFileSystem(client_, Namespace(), options, false);
  ASSERT_NE(made, nullptr);
  FileSystem& fs = *made;
  OpenedFile opened;
  ASSERT_NO_FATAL_FAILURE(OpenBig(fs, &opened));
  const std::string& big = files_["big.bin"];
  const uint64_t bs = Namespace().block_size;
  ASSERT_GE(big.size(), 301 * bs);
  auto read_at = [&](uint64_t offset) {
    std::string got(512, '\0');
    Result<size_t> n = fs.Read(opened.fh, offset, std::span<char>(got.data(), got.size()));
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    ASSERT_EQ(*n, got.size());
    EXPECT_EQ(got, big.substr(offset, got.size())) << offset;
  };
  // Jumps of hundreds of blocks: never sequential.
  const uint64_t offsets[] = {300 * bs + 100, 100 * bs + 1000, 200 * bs + 64, 0 + 3000};
  for (uint64_t offset : offsets) read_at(offset);
  EXPECT_EQ(fs.blocks().Stats().tiers[0].blocks, 0u);
  for (uint64_t offset : offsets) read_at(offset + 512);
  EXPECT_EQ(fs.blocks().Stats().tiers[0].blocks, std::size(offsets));
  fs.Release(opened.fh);
}

// The whole of lake/`path` read through `fs` in one read.
std::string ReadFile(FileSystem& fs, const std::string& path, size_t size) {
  Result<FileAttr> at = fs.Lookup(1, "lake");
  for (size_t from = 0; at.ok() && from < path.size();) {
    size_t slash = std::min(path.find('/', from), path.size());
    at = fs.Lookup(at->ino, path.substr(from, slash - from));
    from = slash + 1;
  }
  EXPECT_TRUE(at.ok()) << at.status().ToString();
  if (!at.ok()) return "";
  Result<OpenedFile> opened = fs.Open(at->ino);
  EXPECT_TRUE(opened.ok()) << opened.status().ToString();
  if (!opened.ok()) return "";
  std::string out(size, '\0');
  Result<size_t> n = fs.Read(opened->fh, 0, std::span<char>(out.data(), out.size()));
  EXPECT_TRUE(n.ok()) << n.status().ToString();
  fs.Release(opened->fh);
  out.resize(n.ok() ? *n : 0);
  return out;
}

// A random reader over more than the mount's memory holds: once the cache is full, a block read
// again is read by range too (fetching it whole would evict another block, for a read of 512
// bytes); the worker keeps the whole block.
TEST_F(ClusterTest, RandomReadersOfAFullMountReadByRange) {
  FileSystemOptions options;
  options.range_reads_when_random = true;
  std::unique_ptr<FileSystem> made = ClusterFileSystem(client_, Namespace(), options, false);
  ASSERT_NE(made, nullptr);
  FileSystem& fs = *made;
  const std::string& big = files_["big.bin"];
  OpenedFile opened;
  ASSERT_NO_FATAL_FAILURE(OpenBig(fs, &opened));
  std::string all(big.size(), '\0');
  for (size_t at = 0; at < big.size();) {  // sequential 128 KiB reads: whole blocks, 1 MiB kept
    size_t want = std::min<size_t>(128 << 10, big.size() - at);
    Result<size_t> n = fs.Read(opened.fh, at, std::span<char>(all.data() + at, want));
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    at += *n;
  }
  fs.Release(opened.fh);
  EXPECT_EQ(all, big);
  EXPECT_FALSE(fs.blocks().HasRoomInMemory(kBlock));
  ASSERT_NO_FATAL_FAILURE(OpenBig(fs, &opened));
  uint64_t fetches = fs.blocks().Stats().fetches;
  const uint64_t bs = Namespace().block_size;
  // The first blocks were evicted by the later ones; each is read twice, far apart.
  for (int pass = 0; pass < 2; ++pass) {
    for (uint64_t block : {7, 300, 11, 150}) {
      std::string got(512, '\0');
      uint64_t offset = block * bs + 100;
      Result<size_t> n = fs.Read(opened.fh, offset, std::span<char>(got.data(), got.size()));
      ASSERT_TRUE(n.ok()) << n.status().ToString();
      EXPECT_EQ(got, big.substr(offset, got.size()));
    }
  }
  fs.Release(opened.fh);
  EXPECT_EQ(fs.blocks().Stats().fetches, fetches) << "a block was fetched whole into a full cache";
}

TierStats TierNamed(FileSystem& fs, const std::string& name) {
  for (const TierStats& t : fs.blocks().Stats().tiers) {
    if (t.tier == name) return t;
  }
  ADD_FAILURE() << "no tier " << name;
  return {};
}

// A mount on the worker's host reads blocks from the worker's cache files, opened once per block
// (one LocateBlock) and verified on every read; a rotten file is never served from (the block is
// streamed instead); a file the worker evicts is closed.
TEST_F(ClusterTest, ShortCircuitReadsVerifiedCacheFilesAndFallsBackOnCorruption) {
  TempDir disk;
  OnlyWorker(16 << 20, disk.path(), /*shared_memory=*/false);
  FileSystemOptions no_read_ahead;
  no_read_ahead.read_ahead_max = 0;
  const std::string& b = files_["dir/sub/b.bin"];  // 3 blocks
  std::unique_ptr<FileSystem> made = ClusterFileSystem(client_, Namespace(), no_read_ahead);
  auto read_b = [&] { return ReadFile(*made, "dir/sub/b.bin", b.size()); };
  // Cold: fetched by the worker and streamed; its memory is not shared, so nothing is mapped.
  EXPECT_EQ(read_b(), b);
  EXPECT_EQ(client_->short_circuit_reads(), 0u);
  EXPECT_EQ(client_->local_sessions(), 0u);
  workers_[0]->blocks().Flush();  // the disk tier writes behind
  // A mount that keeps nothing in memory (one that does keeps the small blocks it reads from the
  // files: SmallBlocksReadFromTheNodesCacheFilesStayInTheMountsMemory).
  std::unique_ptr<FileSystem> fresh =
      ClusterFileSystem(client_, Namespace(), no_read_ahead, /*node_tiers=*/true, 0);
  made.swap(fresh);
  FileSystem& fs = *made;
  uint64_t calls = client_->worker_calls();
  uint64_t streamed = client_->streamed_reads() + client_->bulk_reads();
  EXPECT_EQ(read_b(), b);
  EXPECT_EQ(client_->short_circuit_reads(), 3u);
  EXPECT_EQ(client_->worker_calls(), calls + 3);  // one LocateBlock per block
  EXPECT_EQ(client_->streamed_reads() + client_->bulk_reads(), streamed);
  EXPECT_EQ(read_b(), b);  // the open files serve again: no call at all
  EXPECT_EQ(client_->short_circuit_reads(), 6u);
  EXPECT_EQ(client_->worker_calls(), calls + 3);
  EXPECT_EQ(TierNamed(fs, "node-disk").blocks, 3u);
  // Flip a byte of every block file: the check fails on the open files and the block is streamed.
  for (const auto& entry : std::filesystem::recursive_directory_iterator(disk.path())) {
    if (entry.path().extension() != ".blk") continue;
    std::fstream f(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    char c = 0;
    f.seekg(-1, std::ios::end);
    f.get(c);
    f.seekp(-1, std::ios::end);
    f.put(static_cast<char>(c ^ 0x5a));
  }
  EXPECT_EQ(read_b(), b);
  EXPECT_EQ(client_->short_circuit_reads(), 6u);
  EXPECT_EQ(client_->streamed_reads() + client_->bulk_reads(), streamed + 3);
  EXPECT_EQ(TierNamed(fs, "node-disk").corrupt_blocks, 3u);
}

// A small block read from a co-located worker's cache file is read whole and kept in the mount's
// memory: the file's next reads neither open nor read the file, nor call the worker.
TEST_F(ClusterTest, SmallBlocksReadFromTheNodesCacheFilesStayInTheMountsMemory) {
  TempDir disk;
  OnlyWorker(16 << 20, disk.path(), /*shared_memory=*/false);
  FileSystemOptions no_read_ahead;
  no_read_ahead.read_ahead_max = 0;
  const std::string& b = files_["dir/sub/b.bin"];  // 3 blocks
  ClusterStore store(client_, Namespace());
  EXPECT_EQ(ReadAll(store, "dir/sub/b.bin", b.size()), b);
  workers_[0]->blocks().Flush();
  std::unique_ptr<FileSystem> fs = ClusterFileSystem(client_, Namespace(), no_read_ahead);
  EXPECT_EQ(ReadFile(*fs, "dir/sub/b.bin", b.size()), b);
  EXPECT_EQ(client_->short_circuit_reads(), 3u);
  uint64_t calls = client_->worker_calls();
  EXPECT_EQ(ReadFile(*fs, "dir/sub/b.bin", b.size()), b);
  EXPECT_EQ(client_->short_circuit_reads(), 3u);
  EXPECT_EQ(client_->worker_calls(), calls);
  EXPECT_EQ(TierNamed(*fs, "memory").hits, 3u);
}

// The worker evicts a block whose cache file a mount holds open: the mount closes it within a
// sweep, so no deleted file pins the worker's disk.
TEST_F(ClusterTest, EvictedCacheFilesAreClosedByTheMount) {
  TempDir disk;
  OnlyWorker(16 << 20, disk.path(), /*shared_memory=*/false);
  FileSystemOptions no_read_ahead;
  no_read_ahead.read_ahead_max = 0;
  const std::string& b = files_["dir/sub/b.bin"];
  ClusterStore store(client_, Namespace());
  EXPECT_EQ(ReadAll(store, "dir/sub/b.bin", b.size()), b);
  workers_[0]->blocks().Flush();
  std::unique_ptr<FileSystem> fs = ClusterFileSystem(client_, Namespace(), no_read_ahead);
  EXPECT_EQ(ReadFile(*fs, "dir/sub/b.bin", b.size()), b);
  EXPECT_GT(client_->short_circuit_reads(), 0u);
  uint64_t open = TierNamed(*fs, "node-disk").blocks;
  EXPECT_EQ(open, 3u);
  bool is_dir = false;
  Result<ObjectInfo> info =
      client_->Stat("lake", "dir/sub/b.bin", &is_dir, Clock::time_point::max());
  ASSERT_TRUE(info.ok());
  ContentId content = MakeContentId("lake", info->key, info->etag, kBlock);
  for (uint64_t i = 0; i < 3; ++i) workers_[0]->blocks().Erase(BlockKey{content, i});
  testing::WaitFor([&] { return TierNamed(*fs, "node-disk").blocks == 0; });
  EXPECT_EQ(TierNamed(*fs, "node-disk").blocks, 0u);
}

// A mount on the worker's host maps its memory: a block the worker holds in memory is read in
// place, with no call to any worker, and the mount keeps no copy of its own.
TEST_F(ClusterTest, CoLocatedMemoryHitsMakeNoWorkerCalls) {
  OnlyWorker(16 << 20);
  ASSERT_EQ(client_->local_sessions(), 1u);
  FileSystemOptions no_read_ahead;
  no_read_ahead.read_ahead_max = 0;
  std::unique_ptr<FileSystem> fs = ClusterFileSystem(client_, Namespace(), no_read_ahead);
  const std::string& b = files_["dir/sub/b.bin"];
  const std::string& a = files_["dir/a.txt"];
  EXPECT_EQ(ReadFile(*fs, "dir/sub/b.bin", b.size()), b);  // cold: fetched by the worker
  EXPECT_EQ(ReadFile(*fs, "dir/a.txt", a.size()), a);
  uint64_t calls = client_->worker_calls();
  uint64_t hits = client_->local_memory_hits();
  for (int pass = 0; pass < 3; ++pass) {
    EXPECT_EQ(ReadFile(*fs, "dir/sub/b.bin", b.size()), b);
    EXPECT_EQ(ReadFile(*fs, "dir/a.txt", a.size()), a);
  }
  EXPECT_EQ(client_->worker_calls(), calls);
  EXPECT_EQ(client_->local_memory_hits(), hits + 3 * 4);
  EXPECT_EQ(TierNamed(*fs, "memory").blocks, 0u);  // no second copy in the mount
  EXPECT_EQ(TierNamed(*fs, "node-memory").hits, 3u * 4);
}

// A worker memory tier of 8 blocks, so its shared memory is reused all the time, read by 8
// readers through one co-located mount: every byte right, no read failed.
TEST_F(ClusterTest, EightReadersOfAnEightBlockWorkerReadEveryByteRight) {
  OnlyWorker(8 * kBlock);
  ASSERT_EQ(client_->local_sessions(), 1u);
  std::unique_ptr<FileSystem> made = ClusterFileSystem(client_, Namespace(), FileSystemOptions{});
  FileSystem& fs = *made;
  OpenedFile opened;
  ASSERT_NO_FATAL_FAILURE(OpenBig(fs, &opened));
  const std::string& big = files_["big.bin"];
  std::atomic<uint64_t> failed{0}, wrong{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 8; ++t) {
    readers.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::string got(3000, '\0');
      for (int n = 0; n < 400; ++n) {
        uint64_t block = rng() % 24;  // 24 blocks for 8 slots: constant reuse
        uint64_t offset = block * kBlock + rng() % (kBlock - got.size());
        Result<size_t> r = fs.Read(opened.fh, offset, std::span<char>(got.data(), got.size()));
        if (!r.ok() || *r != got.size()) {
          failed.fetch_add(1);
        } else if (got != big.substr(offset, got.size())) {
          wrong.fetch_add(1);
        }
      }
    });
  }
  for (auto& r : readers) r.join();
  fs.Release(opened.fh);
  EXPECT_EQ(failed.load(), 0u);
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_GT(client_->local_memory_hits(), 0u);
}

// The store sent bytes of another version to a worker (it ignored If-Match): the worker caches
// nothing, the reader gets kPreconditionFailed (not a failover: every worker would hear the same),
// and the folder's next listing asks the master to list it again.
TEST_F(ClusterTest, WorkerDropsAReplyOfAnotherVersion) {
  auto faults = std::make_shared<FaultInjectingStore>(std::make_shared<LocalStore>(data_.path()));
  store_options_.wrap = [faults](std::shared_ptr<ObjectStore>) { return faults; };
  OnlyWorker(16 << 20);
  ClusterStore store(client_, Namespace());
  ListRequest list;
  list.prefix = "dir/sub/";
  list.delimiter = "/";
  auto listed = store.List(list, IoOptions{});
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->objects.size(), 1u);
  ReadOptions version;
  version.if_match = listed->objects[0].etag;
  version.object_size = listed->objects[0].size;

  faults->ReplyWithVersion("etag-of-a-newer-version", std::nullopt);
  std::string buf(kBlock, '\0');
  for (int i = 0; i < 2; ++i) {
    auto n = store.Read("dir/sub/b.bin", kBlock, std::span<char>(buf.data(), buf.size()), version);
    ASSERT_FALSE(n.ok()) << "read bytes of another version";
    EXPECT_EQ(n.status().code(), StatusCode::kPreconditionFailed) << n.status().ToString();
  }
  EXPECT_EQ(faults->Calls(StoreOp::kRead), 2);  // nothing was cached: the second read fetched
  EXPECT_EQ(workers_[0]->blocks().Stats().tiers[0].inserts, 0u);

  // The store has the new version now: the master lists the folder again though its TTL (60 s)
  // has not run out, because the reader found the object changed.
  std::string new_bytes = Pattern(3 * kBlock + 1, 3);
  ASSERT_TRUE(WriteFile(data_.path() + "/dir/sub/b.bin", new_bytes).ok());
  faults->ClearRules();
  auto relisted = store.List(list, IoOptions{});
  ASSERT_TRUE(relisted.ok()) << relisted.status().ToString();
  ASSERT_EQ(relisted->objects.size(), 1u);
  EXPECT_NE(relisted->objects[0].etag, version.if_match);
  EXPECT_EQ(relisted->objects[0].size, new_bytes.size());
  version.if_match = relisted->objects[0].etag;
  version.object_size = relisted->objects[0].size;
  auto n = store.Read("dir/sub/b.bin", kBlock, std::span<char>(buf.data(), buf.size()), version);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(buf, new_bytes.substr(kBlock, kBlock));
}

// A worker is its key: the id is the key's, kept in the cache directory across restarts.
TEST(WorkerIdTest, KeptInTheCacheDirectoryAcrossRestarts) {
  TempDir a, b;
  std::string none;
  Result<WorkerIdentity> first = LoadOrCreateWorkerIdentity(a.path(), &none);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->id.size(), 16u);
  EXPECT_EQ(first->key_path, a.path() + "/worker.key");
  EXPECT_EQ(std::filesystem::status(first->key_path).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  EXPECT_EQ(LoadOrCreateWorkerIdentity(a.path(), &none)->id, first->id);
  EXPECT_NE(LoadOrCreateWorkerIdentity(b.path(), &none)->id, first->id);
  EXPECT_TRUE(none.empty());
  std::string temp1, temp2;
  auto m1 = LoadOrCreateWorkerIdentity("", &temp1);
  auto m2 = LoadOrCreateWorkerIdentity("", &temp2);
  ASSERT_TRUE(m1.ok() && m2.ok());
  EXPECT_NE(m1->id, m2->id);
  EXPECT_FALSE(temp1.empty());
  std::filesystem::remove_all(temp1);
  std::filesystem::remove_all(temp2);
}

}  // namespace
}  // namespace lakecache
