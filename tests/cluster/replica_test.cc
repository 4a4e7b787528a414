// Replicas in a cluster in one process: workers that say they are on other hosts
// (WorkerOptions::host_id) own most blocks, and the client reads them through the worker of its
// own host, which keeps them (worker/block_reader.h, kReadAsReplica).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include "cache/block_key.h"
#include "cluster_client/cluster_client.h"
#include "cluster_client/cluster_store.h"
#include "master/master_server.h"
#include "support/slowdown.h"
#include "support/test_data.h"
#include "support/test_servers.h"
#include "support/wait_for.h"
#include "worker/worker_server.h"

namespace lakecache {
namespace replica_test {

using testing::TempDir;
using testing::WriteFile;
constexpr uint64_t kBlock = 4096;

class ReplicaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_text_ = testing::MakeBytes(3, 64 * kBlock);
    ASSERT_TRUE(WriteFile(data_.path() + "/shard.bin", data_text_).ok());
    config_.namespaces["lake"] = testing::LocalNamespace("lake", data_.path(), kBlock);
    // Listings live a moment: a changed object is seen as such soon after.
    config_.namespaces["lake"].metadata_ttl = std::chrono::milliseconds(200);
    config_.cluster.heartbeat_interval = std::chrono::milliseconds(100);
    config_.cluster.heartbeat_timeout = std::chrono::milliseconds(600) * testing::kSlowdown;
    store_options_.retries = false;
    MasterOptions master_options;
    master_options.listen = "127.0.0.1:0";
    master_options.store = store_options_;
    auto master = MasterServer::Start(config_, master_options);
    ASSERT_TRUE(master.ok()) << master.status().ToString();
    master_ = std::move(*master);
    // Two workers of other hosts and, last, the worker of this one.
    for (const char* host : {"host-a", "host-b", ""}) StartWorker(host);
    auto client = ClusterClient::Connect(master_->address(), {});
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = *client;
    ASSERT_TRUE(testing::WaitFor(
        [&] { return client_->RefreshView().ok() && client_->Workers().size() == 3; },
        std::chrono::seconds(10) * testing::kSlowdown));
    // Every worker has the client's view, the three of them in it (its heartbeats fetch it): an
    // owner records as holders only the workers it knows.
    const uint64_t epoch = client_->epoch();
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          for (auto& w : workers_) {
            if (w->peer_epoch() < epoch) return false;
          }
          return true;
        },
        std::chrono::seconds(10) * testing::kSlowdown));
  }

  void StartWorker(const std::string& host) {
    Config config = config_;
    config.cache.memory_capacity = 16 << 20;
    config.cache.policy = "lru";
    if (host.empty()) config.cache.replica_percent = host_replica_percent_;
    WorkerOptions options;
    options.master = master_->address();
    options.store = store_options_;
    options.host_id = host;
    auto worker = WorkerServer::Start(config, options);
    ASSERT_TRUE(worker.ok()) << worker.status().ToString();
    workers_.push_back(std::move(*worker));
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
    Result<size_t> n = store.Read(key, 0, std::span<char>(out.data(), out.size()), ReadOptions{});
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    out.resize(n.ok() ? *n : 0);
    return out;
  }

  WorkerServer& HostWorker() { return *workers_.back(); }

  uint32_t host_replica_percent_ = 50;  // cache.replica_share of this host's worker
  TempDir data_;
  std::string data_text_;
  Config config_;
  StoreOptions store_options_;
  std::unique_ptr<MasterServer> master_;
  std::vector<std::unique_ptr<WorkerServer>> workers_;
  std::shared_ptr<ClusterClient> client_;
};

TEST_F(ReplicaTest, AHostReadsOtherHostsBlocksThroughItsOwnWorkerWhichKeepsThem) {
  ClusterStore store(client_, Namespace());
  EXPECT_EQ(ReadAll(store, "shard.bin", data_text_.size()), data_text_);
  const uint64_t through = client_->replica_reads();
  EXPECT_GT(through, 16u) << "most of the 64 blocks are owned by the other hosts";
  EXPECT_EQ(HostWorker().replica_count(), through)
      << "each block read through the host's worker is kept there once";
  uint64_t noted = 0;
  for (size_t i = 0; i + 1 < workers_.size(); ++i) noted += workers_[i]->holder_blocks();
  EXPECT_EQ(noted, through) << "their owners know the host's worker holds them";

  // Every block is now in this host's memory (the worker's own, and the replicas), where a
  // mount's next reader finds it without asking any worker.
  Result<ObjectInfo> head = store.Head("shard.bin", {});
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  const ContentId content = MakeContentId("lake", "shard.bin", head->etag, kBlock);
  for (uint64_t i = 0; i < 64; ++i) {
    EXPECT_NE(client_->FindLocal(BlockKey{content, i}), nullptr) << "block " << i;
  }
}

// A replica belongs to one version of its object: a new version is read anew, never served
// from the old one's replicas.
// cache.replica_share 0%: the host's worker still gets each block from its peers for the mount,
// sends the bytes instead of placing them, and keeps none.
class NoReplicaShareTest : public ReplicaTest {
 protected:
  void SetUp() override {
    host_replica_percent_ = 0;
    ReplicaTest::SetUp();
  }
};

TEST_F(NoReplicaShareTest, TheHostsWorkerServesTheBlocksAndKeepsNone) {
  ClusterStore store(client_, Namespace());
  EXPECT_EQ(ReadAll(store, "shard.bin", data_text_.size()), data_text_);
  EXPECT_GT(client_->replica_reads(), 16u);
  EXPECT_EQ(HostWorker().replica_count(), 0u);
  Result<ObjectInfo> head = store.Head("shard.bin", {});
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  const ContentId content = MakeContentId("lake", "shard.bin", head->etag, kBlock);
  size_t local = 0;
  for (uint64_t i = 0; i < 64; ++i) local += client_->FindLocal(BlockKey{content, i}) != nullptr;
  EXPECT_LT(local, 32u) << "only the blocks this host's worker owns stay in its memory";
}

TEST_F(ReplicaTest, ANewVersionOfTheObjectIsNeverServedFromTheOldOnesReplicas) {
  ClusterStore store(client_, Namespace());
  ASSERT_EQ(ReadAll(store, "shard.bin", data_text_.size()), data_text_);
  const std::string changed = testing::MakeBytes(4, 64 * kBlock);
  ASSERT_TRUE(WriteFile(data_.path() + "/shard.bin", changed).ok());
  ClusterStore fresh(client_, Namespace());
  // The listing is the master's; once it shows the new version, its bytes are the new ones.
  ASSERT_TRUE(
      testing::WaitFor([&] { return ReadAll(fresh, "shard.bin", changed.size()) == changed; },
                       std::chrono::seconds(30) * testing::kSlowdown));
}

TEST_F(ReplicaTest, WithoutReplicasEveryBlockComesFromItsOwner) {
  ClusterClientOptions options;
  options.replicas = false;
  auto client = ClusterClient::Connect(master_->address(), options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  ClusterNamespace ns;
  for (const ClusterNamespace& n : (*client)->namespaces()) {
    if (n.name == "lake") ns = n;
  }
  ClusterStore store(*client, ns);
  EXPECT_EQ(ReadAll(store, "shard.bin", data_text_.size()), data_text_);
  EXPECT_EQ((*client)->replica_reads(), 0u);
  EXPECT_EQ(HostWorker().replica_count(), 0u);
}

}  // namespace replica_test
}  // namespace lakecache
