// A cluster in one process: a MasterServer and WorkerServers on loopback over a file:// namespace,
// read through ClusterClient / ClusterStore and a FileSystem, as a cluster-mode mount reads it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "cache/block_key.h"
#include "client/cluster_client.h"
#include "client/cluster_store.h"
#include "client/file_system.h"
#include "client/node_tier.h"
#include "master/master_server.h"
#include "rpc/lakecache.pb.h"
#include "support/slowdown.h"
#include "support/test_servers.h"
#include "ufs/fault_injecting_store.h"
#include "ufs/local_store.h"
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
    auto master = MasterServer::Start(config_, {"127.0.0.1:0", store_options_});
    ASSERT_TRUE(master.ok()) << master.status().ToString();
    master_ = std::move(*master);
    // Capacities 16, 16 and 32 MiB: the third worker should own half of the blocks.
    for (uint64_t mib : {16, 16, 32}) StartWorker(mib << 20);
    auto client = ClusterClient::Connect(master_->address());
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = *client;
    WaitForWorkers(3);
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
    auto worker = WorkerServer::Start(config, options);
    ASSERT_TRUE(worker.ok()) << worker.status().ToString();
    workers_.push_back(std::move(*worker));
  }

  // Replaces the workers with one of `memory` bytes (and a disk tier in `disk`).
  void OnlyWorker(uint64_t memory, const std::string& disk = "", bool shared_memory = true) {
    for (auto& w : workers_) w->Shutdown();
    workers_.clear();
    StartWorker(memory, disk, shared_memory);
    WaitForWorkers(1);
  }

  void WaitForWorkers(size_t n) {
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(10) * testing::kSlowdown;
    while (std::chrono::steady_clock::now() < deadline) {
      ASSERT_TRUE(client_->RefreshView().ok());
      if (client_->Workers().size() == n) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
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
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5) * testing::kSlowdown;
  while (client_->Workers().size() != 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(client_->RefreshView().ok());
  }
  EXPECT_EQ(client_->Workers().size(), 2u);
  EXPECT_EQ(ReadAll(store, "big.bin", big.size()), big);
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

// A FileSystem reading namespace "lake" through the cluster, as a cluster mount builds it.
std::unique_ptr<FileSystem> ClusterFileSystem(const std::shared_ptr<ClusterClient>& client,
                                              const ClusterNamespace& ns, FileSystemOptions options,
                                              bool node_tiers = true) {
  NamespaceTable::Source source;
  source.config.name = ns.name;
  source.config.block_size = ns.block_size;
  source.config.metadata_ttl = ns.metadata_ttl;
  source.prefix = ns.key_prefix;
  source.store = std::make_shared<ClusterStore>(client, ns);
  std::vector<NamespaceTable::Source> sources;
  sources.push_back(std::move(source));
  CacheConfig cache;
  cache.memory_capacity = 1 << 20;
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
  std::unique_ptr<FileSystem> fresh = ClusterFileSystem(client_, Namespace(), no_read_ahead);
  made.swap(fresh);  // a mount that holds nothing in memory
  FileSystem& fs = *made;
  uint64_t calls = client_->worker_calls();
  uint64_t streamed = client_->streamed_reads();
  EXPECT_EQ(read_b(), b);
  EXPECT_EQ(client_->short_circuit_reads(), 3u);
  EXPECT_EQ(client_->worker_calls(), calls + 3);  // one LocateBlock per block
  EXPECT_EQ(client_->streamed_reads(), streamed);
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
  EXPECT_EQ(client_->streamed_reads(), streamed + 3);
  EXPECT_EQ(TierNamed(fs, "node-disk").corrupt_blocks, 3u);
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
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5) * testing::kSlowdown;
  while (TierNamed(*fs, "node-disk").blocks > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
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

TEST(WorkerIdTest, KeptInTheCacheDirectoryAcrossRestarts) {
  TempDir a, b;
  Result<std::string> first = LoadOrCreateWorkerId(a.path());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->size(), 16u);
  EXPECT_EQ(*LoadOrCreateWorkerId(a.path()), *first);
  EXPECT_NE(*LoadOrCreateWorkerId(b.path()), *first);
  EXPECT_NE(*LoadOrCreateWorkerId(""), *LoadOrCreateWorkerId(""));
}

}  // namespace
}  // namespace lakecache
