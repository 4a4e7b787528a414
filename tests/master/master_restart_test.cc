// A master restarted with the same --metadata-dir serves the listings it had from its index,
// without listing the store again. LAKECACHE_RESTART_OBJECTS sizes the synthetic tree (default
// 20k; the figure in docs/benchmarks.md is 1M).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/metrics.h"
#include "master/master_server.h"
#include "meta/listing_index.h"
#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"
#include "support/test_servers.h"
#include "ufs/local_store.h"

namespace lakecache {
namespace {

uint64_t TreeSize() {
  const char* env = std::getenv("LAKECACHE_RESTART_OBJECTS");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : 20000;
}

class MasterRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(LocalStore(lake_.path()).Put("a.txt", "hello", {}).ok());
    // The lake's listings outlive any walk (an hour: the one of 100M objects takes a minute).
    std::string yaml = "namespaces:\n  lake:\n    uri: file://" + lake_.path() +
                       "\n    metadata_ttl: 1h\n  syn:\n    uri: synthetic://" +
                       std::to_string(TreeSize()) + ",fanout=1000\n    immutable: true\n";
    auto config = LoadConfigText(yaml, "the test", ConfigFormat::kYaml);
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    config_ = *config;
  }

  // Starts a master over the index; its store requests are counted in a registry of its own.
  void Start() {
    master_.reset();
    registry_ = std::make_unique<metrics::Registry>();
    MasterOptions options;
    options.listen = "127.0.0.1:0";
    options.metadata_dir = index_.path() + "/metadata";
    options.store.metrics = registry_.get();
    auto master = MasterServer::Start(config_, options);
    ASSERT_TRUE(master.ok()) << master.status().ToString();
    master_ = std::move(*master);
    stub_ = rpc::MasterService::NewStub(rpc::OpenChannel(master_->address()));
  }

  double Lists() {
    return registry_
        ->GetCounter("lakecache_object_store_requests_total", "", {{"op", "list"}, {"code", "ok"}})
        .Value();
  }

  rpc::ListDirResponse ListDir(const std::string& ns, const std::string& dir, bool packed = false) {
    grpc::ClientContext context;
    rpc::SetTimeout(&context, std::chrono::seconds(30));
    rpc::ListDirRequest req;
    req.set_ns(ns);
    req.set_dir(dir);
    req.set_packed(packed);
    rpc::ListDirResponse resp;
    grpc::Status st = stub_->ListDir(&context, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp;
  }

  // Lists every folder of namespace `ns` in packed pages, as mounts ask for them, each decoded
  // into a listing; returns the files seen.
  uint64_t Walk(const std::string& ns) {
    uint64_t files = 0;
    std::deque<std::string> folders = {""};
    while (!folders.empty()) {
      const std::string dir = std::move(folders.front());
      folders.pop_front();
      std::optional<IndexedListing> page = ListingIndex::Decode(ListDir(ns, dir, true).packed());
      if (!page) {
        ADD_FAILURE() << dir << ": no packed page";
        return files;
      }
      const DirListing& listing = *page->listing;
      for (size_t i = 0; i < listing.size(); ++i) {
        if (!listing.is_dir_at(i)) {
          ++files;
        } else {
          folders.push_back(dir.empty() ? std::string(listing.name_at(i))
                                        : dir + "/" + std::string(listing.name_at(i)));
        }
      }
    }
    return files;
  }

  testing::TempDir lake_{"lakecache-restart-lake"};
  testing::TempDir index_{"lakecache-restart-index"};
  Config config_;
  std::unique_ptr<metrics::Registry> registry_;
  std::unique_ptr<MasterServer> master_;
  std::unique_ptr<rpc::MasterService::Stub> stub_;
};

TEST_F(MasterRestartTest, ARestartedMasterServesItsListingsWithoutListingTheStore) {
  using Seconds = std::chrono::duration<double>;
  auto first = std::chrono::steady_clock::now();
  Start();
  EXPECT_EQ(Walk("syn"), TreeSize());
  Seconds listed = std::chrono::steady_clock::now() - first;
  EXPECT_EQ(ListDir("lake", "").files_size(), 1);
  EXPECT_GT(Lists(), 2.0);  // the counter counts: the probes and the walk's listings
  ASSERT_TRUE(LocalStore(lake_.path()).Put("new.txt", "x", {}).ok());

  auto start = std::chrono::steady_clock::now();
  Start();
  Seconds started = std::chrono::steady_clock::now() - start;
  const double probes = Lists();  // one root probe per namespace at start
  EXPECT_EQ(Walk("syn"), TreeSize());
  Seconds served = std::chrono::steady_clock::now() - start;
  std::printf(
      "%llu objects: first start and walk %.2f s; restart %.3f s, restart and walk %.2f s, "
      "%.0f LIST calls beyond the probes\n",
      static_cast<unsigned long long>(TreeSize()), listed.count(), started.count(), served.count(),
      Lists() - probes);
  EXPECT_EQ(Lists(), probes);
  // Within its TTL the lake's root is the one listed before the restart.
  EXPECT_EQ(ListDir("lake", "").files_size(), 1);
  EXPECT_EQ(Lists(), probes);
}

}  // namespace
}  // namespace lakecache
