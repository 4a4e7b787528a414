// MasterServer in-process on 127.0.0.1:0 over file:// namespaces, called through a real gRPC stub.
#include "master/master_server.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/object_uri.h"
#include "meta/listing_index.h"
#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"
#include "support/test_servers.h"
#include "ufs/local_store.h"

namespace lakecache {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kBlockSize = 1 << 20;

NamespaceConfig LocalNamespace(const std::string& name, const std::string& dir) {
  return testing::LocalNamespace(name, dir, kBlockSize);
}

MasterOptions LoopbackOptions() {
  MasterOptions options;
  options.listen = "127.0.0.1:0";
  return options;
}

class MasterServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Put(lake_dir_, "a.txt", "hello");
    Put(lake_dir_, "data/top.bin", "0123456789");
    Put(lake_dir_, "data/x/1.bin", "1");
    config_.namespaces["lake"] = LocalNamespace("lake", lake_dir_.path());
    config_.namespaces["other"] = LocalNamespace("other", other_dir_.path());
    config_.namespaces["other"].immutable = true;
    config_.namespaces["other"].metadata_ttl = std::chrono::minutes(5);
    config_.cluster.heartbeat_interval = milliseconds(250);
    config_.cluster.heartbeat_timeout = milliseconds(2000);
    auto server = MasterServer::Start(config_, LoopbackOptions());
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    stub_ = rpc::MasterService::NewStub(rpc::OpenChannel(server_->address()));
  }

  static void Put(const testing::TempDir& dir, const std::string& key, const std::string& data) {
    Status st = LocalStore(dir.path()).Put(key, data, {}).status();
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  std::unique_ptr<grpc::ClientContext> Context() {
    auto context = std::make_unique<grpc::ClientContext>();
    rpc::SetTimeout(context.get(), std::chrono::seconds(5));
    return context;
  }

  grpc::Status ListDir(const std::string& ns, const std::string& dir, rpc::ListDirResponse* resp,
                       const std::string& start_after = "", uint32_t max_entries = 0,
                       bool packed = false) {
    rpc::ListDirRequest req;
    req.set_ns(ns);
    req.set_dir(dir);
    req.set_start_after(start_after);
    req.set_max_entries(max_entries);
    req.set_packed(packed);
    return stub_->ListDir(Context().get(), req, resp);
  }

  grpc::Status Stat(const std::string& ns, const std::string& path, rpc::StatResponse* resp) {
    rpc::StatRequest req;
    req.set_ns(ns);
    req.set_path(path);
    return stub_->Stat(Context().get(), req, resp);
  }

  static std::vector<std::string> FileKeys(const rpc::ListDirResponse& resp) {
    std::vector<std::string> keys;
    for (const rpc::ObjectEntry& f : resp.files()) keys.push_back(f.key());
    return keys;
  }
  static std::vector<std::string> Dirs(const rpc::ListDirResponse& resp) {
    return {resp.dirs().begin(), resp.dirs().end()};
  }

  testing::TempDir lake_dir_{"lakecache-master-lake"};
  testing::TempDir other_dir_{"lakecache-master-other"};
  Config config_;
  std::unique_ptr<MasterServer> server_;
  std::unique_ptr<rpc::MasterService::Stub> stub_;
};

TEST_F(MasterServerTest, BindsAnActualPort) {
  EXPECT_TRUE(server_->address().starts_with("127.0.0.1:"));
  EXPECT_NE(server_->address(), "127.0.0.1:0");
}

TEST_F(MasterServerTest, GetNamespacesDescribesEveryNamespace) {
  rpc::NamespacesResponse resp;
  ASSERT_TRUE(stub_->GetNamespaces(Context().get(), {}, &resp).ok());
  ASSERT_EQ(resp.namespaces_size(), 2);
  const rpc::NamespaceInfo& lake = resp.namespaces(0);
  EXPECT_EQ(lake.name(), "lake");
  EXPECT_EQ(lake.uri(), "file://" + lake_dir_.path());
  EXPECT_EQ(lake.block_size(), kBlockSize);
  EXPECT_EQ(lake.metadata_ttl_ms(), 60000u);
  EXPECT_FALSE(lake.immutable());
  EXPECT_EQ(lake.key_prefix(), "");
  const rpc::NamespaceInfo& other = resp.namespaces(1);
  EXPECT_EQ(other.name(), "other");
  EXPECT_EQ(other.metadata_ttl_ms(), 300000u);
  EXPECT_TRUE(other.immutable());
}

TEST_F(MasterServerTest, ListDirRootShowsFilesAndFolders) {
  rpc::ListDirResponse resp;
  grpc::Status st = ListDir("lake", "", &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(resp.exists());
  EXPECT_EQ(FileKeys(resp), (std::vector<std::string>{"a.txt"}));
  EXPECT_EQ(resp.files(0).size(), 5u);
  EXPECT_FALSE(resp.files(0).etag().empty());
  EXPECT_GT(resp.files(0).mtime(), 0);
  EXPECT_EQ(Dirs(resp), (std::vector<std::string>{"data/"}));
}

TEST_F(MasterServerTest, ListDirNestedHasBucketRelativeKeys) {
  rpc::ListDirResponse resp;
  ASSERT_TRUE(ListDir("lake", "data", &resp).ok());
  EXPECT_TRUE(resp.exists());
  EXPECT_EQ(FileKeys(resp), (std::vector<std::string>{"data/top.bin"}));
  EXPECT_EQ(resp.files(0).size(), 10u);
  EXPECT_EQ(Dirs(resp), (std::vector<std::string>{"data/x/"}));

  ASSERT_TRUE(ListDir("lake", "data/x", &resp).ok());
  EXPECT_EQ(FileKeys(resp), (std::vector<std::string>{"data/x/1.bin"}));
  EXPECT_TRUE(resp.dirs().empty());
}

// Asked for it, the master sends a page in the listing index's format: the same entries.
TEST_F(MasterServerTest, ListDirPackedSaysWhatFilesAndDirsSay) {
  Put(lake_dir_, "data/second.bin", "22");
  rpc::ListDirResponse plain, packed;
  ASSERT_TRUE(ListDir("lake", "data", &plain).ok());
  ASSERT_TRUE(ListDir("lake", "data", &packed, "", 0, true).ok());
  EXPECT_TRUE(packed.files().empty());
  EXPECT_TRUE(packed.dirs().empty());
  EXPECT_TRUE(packed.exists());
  EXPECT_EQ(packed.packed_prefix(), "data/");
  std::optional<IndexedListing> page = ListingIndex::Decode(packed.packed());
  ASSERT_TRUE(page.has_value());
  std::vector<std::string> dirs, keys;
  for (const DirEntry& e : page->listing->ToEntries()) {
    if (e.is_dir) {
      dirs.push_back(packed.packed_prefix() + e.name + "/");
      continue;
    }
    keys.push_back(packed.packed_prefix() + e.name);
    const rpc::ObjectEntry& same = plain.files(static_cast<int>(keys.size() - 1));
    EXPECT_EQ(same.key(), keys.back());
    EXPECT_EQ(same.size(), e.size);
    EXPECT_EQ(same.etag(), e.etag);
    EXPECT_EQ(same.mtime(), e.mtime);
  }
  EXPECT_EQ(keys, FileKeys(plain));
  EXPECT_EQ(dirs, Dirs(plain));
  // A page of it: one entry after "second.bin".
  ASSERT_TRUE(ListDir("lake", "data", &packed, "second.bin", 1, true).ok());
  page = ListingIndex::Decode(packed.packed());
  ASSERT_TRUE(page.has_value());
  ASSERT_EQ(page->listing->size(), 1u);
  EXPECT_EQ(page->listing->name_at(0), "top.bin");
  EXPECT_EQ(packed.next_start_after(), "top.bin");
}

// A folder too big for one message comes in pages, folders and files in one name order.
TEST_F(MasterServerTest, ListDirServesPagesInNameOrder) {
  for (const char* name : {"b.bin", "c.bin", "d.bin", "e.bin"}) Put(lake_dir_, name, "x");
  Put(lake_dir_, "bb/f.bin", "x");
  std::vector<std::string> names;
  std::string after;
  int pages = 0;
  do {
    rpc::ListDirResponse resp;
    ASSERT_TRUE(ListDir("lake", "", &resp, after, 2).ok());
    EXPECT_LE(resp.files_size() + resp.dirs_size(), 2);
    EXPECT_TRUE(resp.exists());
    for (const std::string& d : resp.dirs()) names.push_back(d);
    for (const rpc::ObjectEntry& f : resp.files()) names.push_back(f.key());
    after = resp.next_start_after();
    ASSERT_LT(++pages, 10);
  } while (!after.empty());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a.txt", "b.bin", "bb/", "c.bin", "d.bin", "data/",
                                             "e.bin"}));
  EXPECT_EQ(pages, 4);
  rpc::ListDirResponse past;
  ASSERT_TRUE(ListDir("lake", "", &past, "zzz", 2).ok());
  EXPECT_EQ(past.files_size() + past.dirs_size(), 0);
  EXPECT_TRUE(past.next_start_after().empty());
}

TEST_F(MasterServerTest, ListDirOfMissingFolderSaysItDoesNotExist) {
  rpc::ListDirResponse resp;
  ASSERT_TRUE(ListDir("lake", "nope", &resp).ok());
  EXPECT_FALSE(resp.exists());
  EXPECT_TRUE(resp.files().empty());
  EXPECT_TRUE(resp.dirs().empty());
}

TEST_F(MasterServerTest, ListingsWithinTheTtlComeFromOneSharedCache) {
  rpc::ListDirResponse resp;
  ASSERT_TRUE(ListDir("lake", "data", &resp).ok());
  Put(lake_dir_, "data/late.bin", "late");
  // Another client, on its own channel, within the TTL: served the cached listing.
  auto other_client = rpc::MasterService::NewStub(rpc::OpenChannel(server_->address()));
  rpc::ListDirRequest req;
  req.set_ns("lake");
  req.set_dir("data");
  ASSERT_TRUE(other_client->ListDir(Context().get(), req, &resp).ok());
  EXPECT_EQ(FileKeys(resp), (std::vector<std::string>{"data/top.bin"}));
  // Stat reads the same cached listing.
  rpc::StatResponse stat;
  EXPECT_EQ(Stat("lake", "data/late.bin", &stat).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(MasterServerTest, StatFileAndFolder) {
  rpc::StatResponse resp;
  ASSERT_TRUE(Stat("lake", "data/top.bin", &resp).ok());
  EXPECT_FALSE(resp.is_dir());
  EXPECT_EQ(resp.entry().key(), "data/top.bin");
  EXPECT_EQ(resp.entry().size(), 10u);
  EXPECT_FALSE(resp.entry().etag().empty());

  ASSERT_TRUE(Stat("lake", "data/x", &resp).ok());
  EXPECT_TRUE(resp.is_dir());
  EXPECT_EQ(resp.entry().key(), "data/x/");
}

TEST_F(MasterServerTest, StatOfMissingPathIsNotFound) {
  rpc::StatResponse resp;
  grpc::Status st = Stat("lake", "data/missing.bin", &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(st.error_message().find("data/missing.bin"), std::string::npos) << st.error_message();
}

TEST_F(MasterServerTest, UnknownNamespaceIsNotFoundNamingTheNamespaces) {
  rpc::ListDirResponse list;
  grpc::Status st = ListDir("nope", "", &list);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(st.error_message(), "unknown namespace 'nope' (there are: lake, other)");
  rpc::StatResponse stat;
  EXPECT_EQ(Stat("nope", "a.txt", &stat).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(MasterServerTest, PathsOutsideTheNamespaceAreInvalid) {
  for (const std::string bad : {"/data", "data/", "..", "data/../..", "data//x", "./data"}) {
    rpc::ListDirResponse list;
    EXPECT_EQ(ListDir("lake", bad, &list).error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    rpc::StatResponse stat;
    EXPECT_EQ(Stat("lake", bad, &stat).error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
  }
  rpc::StatResponse stat;
  EXPECT_EQ(Stat("lake", "", &stat).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(MasterServerTest, RegisteredWorkerShowsInTheClusterView) {
  rpc::RegisterRequest reg;
  reg.mutable_worker()->set_id("w1");
  reg.mutable_worker()->set_address("127.0.0.1:7001");
  reg.mutable_worker()->set_capacity_bytes(1 << 30);
  rpc::RegisterResponse reg_resp;
  ASSERT_TRUE(stub_->Register(Context().get(), reg, &reg_resp).ok());
  EXPECT_EQ(reg_resp.heartbeat_interval_ms(), 250u);

  rpc::ClusterView view;
  ASSERT_TRUE(stub_->GetClusterView(Context().get(), {}, &view).ok());
  EXPECT_EQ(view.epoch(), reg_resp.epoch());
  ASSERT_EQ(view.workers_size(), 1);
  EXPECT_EQ(view.workers(0).id(), "w1");
  EXPECT_EQ(view.workers(0).address(), "127.0.0.1:7001");
  EXPECT_EQ(view.heartbeat_interval_ms(), 250u);
  EXPECT_EQ(view.heartbeat_timeout_ms(), 2000u);

  rpc::HeartbeatRequest beat;
  *beat.mutable_worker() = reg.worker();
  rpc::HeartbeatResponse beat_resp;
  ASSERT_TRUE(stub_->Heartbeat(Context().get(), beat, &beat_resp).ok());
  EXPECT_TRUE(beat_resp.registered());
  EXPECT_EQ(beat_resp.epoch(), reg_resp.epoch());
}

TEST_F(MasterServerTest, HeartbeatOfUnknownWorkerAsksItToRegister) {
  rpc::HeartbeatRequest beat;
  beat.mutable_worker()->set_id("stranger");
  beat.mutable_worker()->set_address("127.0.0.1:7002");
  rpc::HeartbeatResponse resp;
  ASSERT_TRUE(stub_->Heartbeat(Context().get(), beat, &resp).ok());
  EXPECT_FALSE(resp.registered());
}

TEST_F(MasterServerTest, RegisterWithoutIdIsInvalid) {
  rpc::RegisterRequest reg;
  reg.mutable_worker()->set_address("127.0.0.1:7001");
  rpc::RegisterResponse resp;
  EXPECT_EQ(stub_->Register(Context().get(), reg, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(MasterServerTest, ShutdownIsIdempotentAndStopsServing) {
  server_->Shutdown();
  server_->Shutdown();
  grpc::ClientContext context;
  rpc::SetTimeout(&context, milliseconds(500));
  rpc::NamespacesResponse resp;
  EXPECT_EQ(stub_->GetNamespaces(&context, {}, &resp).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(MasterServerTest, SecondServerOnTheSameAddressFailsToStart) {
  MasterOptions options = LoopbackOptions();
  options.listen = server_->address();
  auto second = MasterServer::Start(config_, options);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find(server_->address()), std::string::npos)
      << second.status().ToString();
}

// The cluster view carries the master's own address as it announces it and whether it serves
// plain text beyond loopback.
TEST_F(MasterServerTest, ClusterViewShowsTheAdvertisedAddressAndInsecure) {
  rpc::ClusterView plain;
  ASSERT_TRUE(stub_->GetClusterView(Context().get(), {}, &plain).ok());
  EXPECT_EQ(plain.address(), server_->address());
  EXPECT_FALSE(plain.insecure());

  MasterOptions options = LoopbackOptions();
  options.advertise = "127.0.0.5:0";  // port 0: the bound one
  options.insecure = true;
  auto advertised = MasterServer::Start(config_, options);
  ASSERT_TRUE(advertised.ok()) << advertised.status().ToString();
  const std::string& address = (*advertised)->address();
  ASSERT_TRUE(address.starts_with("127.0.0.5:")) << address;
  std::string bound = "127.0.0.1:" + address.substr(address.rfind(':') + 1);
  auto stub = rpc::MasterService::NewStub(rpc::OpenChannel(bound));
  rpc::ClusterView view;
  ASSERT_TRUE(stub->GetClusterView(Context().get(), {}, &view).ok());
  EXPECT_EQ(view.address(), address);
  EXPECT_TRUE(view.insecure());

  options.advertise = "[::1]:7400:";
  auto bad = MasterServer::Start(config_, options);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(MasterServerStartTest, UnreachableStoreFailsNamingTheNamespace) {
  Config config;
  NamespaceConfig ns;
  ns.name = "remote";
  ns.uri = "s3://bucket/prefix";
  ns.location = *ParseObjectUri(ns.uri);
  ns.endpoint = "http://127.0.0.1:1";  // nothing listens there
  ns.path_style = true;
  ns.access_key = "AKIDTEST";
  ns.secret_key = Secret("do-not-print-me");
  config.namespaces["remote"] = ns;
  MasterOptions options = LoopbackOptions();
  options.store.retries = false;
  auto server = MasterServer::Start(config, options);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("namespace 'remote'"), std::string::npos)
      << server.status().ToString();
  EXPECT_EQ(server.status().message().find("do-not-print-me"), std::string::npos);
}

TEST(MasterServerStartTest, ConfigWithoutNamespacesIsRejected) {
  auto server = MasterServer::Start(Config{}, LoopbackOptions());
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lakecache
