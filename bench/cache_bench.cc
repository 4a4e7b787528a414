// cache_bench: hit-path lookups and per-tier 4 MiB block throughput, each beside its baseline.
//
//   build/bench/cache_bench [--benchmark_filter=REGEX]
// Memory tier Read/Insert run next to a plain memcpy of 4 MiB; disk tier Read (verified) and Insert
// next to pread/write of plain 4 MiB files in the same directory. The page cache is warm (nothing
// is dropped), so the disk numbers measure the software path, not the device. Results and ratios
// are recorded in docs/benchmarks.md.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cache/block_store.h"
#include "cache/disk_tier.h"
#include "cache/memory_tier.h"

namespace lakecache {
namespace {

constexpr uint64_t kBlockSize = 4ull << 20;
constexpr uint64_t kHitKeys = 1000;
constexpr uint64_t kDiskBlocks = 16;

BlockRequest RequestFor(uint64_t index, uint64_t length = kBlockSize) {
  BlockRequest r;
  r.key = BlockKey{MakeContentId("bench", "train/shard", "etag", kBlockSize), index};
  r.object_key = "train/shard";
  r.etag = "etag";
  r.offset = index * kBlockSize;
  r.length = length;
  return r;
}

// A block of `size` bytes with every page written (no page faults later).
std::shared_ptr<Block> FilledBlock(uint64_t size, char seed) {
  std::shared_ptr<Block> b = Block::Allocate(size);
  std::memset(b->mutable_data(), seed, size);
  return b;
}

// Two page-aligned 4 MiB buffers, every page written. Page-aligned as a FUSE reply buffer is: the
// kernel's copy (pread) into a buffer 16 bytes past a page boundary, where malloc puts a large
// vector, ran 5x slower on the machine measured, which would skew every baseline.
std::span<char> Buffer(int slot) {
  static char* buffers[2] = {static_cast<char*>(std::aligned_alloc(4096, kBlockSize)),
                             static_cast<char*>(std::aligned_alloc(4096, kBlockSize))};
  static bool filled = [] {
    std::memset(buffers[0], 1, kBlockSize);
    std::memset(buffers[1], 2, kBlockSize);
    return true;
  }();
  (void)filled;
  return {buffers[slot], kBlockSize};
}

template <typename T>
T Must(Result<T> r) {
  if (!r.ok()) {
    std::fprintf(stderr, "cache_bench: %s\n", r.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(r).value();
}

// ---- (a) Hit path: BlockStore::Get on a warm memory tier ----

struct WarmStore {
  std::unique_ptr<BlockStore> store;
  std::vector<BlockRequest> requests;  // built once: a request per op would allocate its strings
  BlockSource source = [](const BlockRequest& r) -> Result<BlockRef> {
    return BlockRef(FilledBlock(r.length, 7));
  };

  WarmStore() {
    std::vector<std::unique_ptr<CacheTier>> tiers;
    // Lookups never touch the bytes, so small blocks keep the warm set in memory cheaply.
    tiers.push_back(Must(MemoryTier::Create(kHitKeys * 64 * 1024, kDefaultEvictionPolicy)));
    store = std::make_unique<BlockStore>(std::move(tiers));
    for (uint64_t i = 0; i < kHitKeys; ++i) {
      requests.push_back(RequestFor(i, 64 * 1024));
      if (!store->Get(requests.back(), source).ok()) std::exit(1);
    }
  }
};

void BM_HitPathGet(benchmark::State& state) {
  static WarmStore warm;
  uint64_t i = static_cast<uint64_t>(state.thread_index()) * 499;
  for (auto _ : state) {
    Result<BlockRef> block = warm.store->Get(warm.requests[i++ % kHitKeys], warm.source);
    benchmark::DoNotOptimize(block);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HitPathGet)->Threads(1)->Threads(2)->UseRealTime();

// ---- (b) Memory tier, 4 MiB blocks ----

void BM_Memcpy4MiB(benchmark::State& state) {
  std::span<char> src = Buffer(0);
  std::span<char> dst = Buffer(1);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), kBlockSize);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kBlockSize);
}
BENCHMARK(BM_Memcpy4MiB);

void BM_MemoryTierRead4MiB(benchmark::State& state) {
  auto tier = Must(MemoryTier::Create(64 * kBlockSize, kDefaultEvictionPolicy));
  for (uint64_t i = 0; i < 8; ++i) tier->Insert(RequestFor(i), FilledBlock(kBlockSize, 3));
  BlockKey key = RequestFor(0).key;
  std::span<char> dst = Buffer(1);
  for (auto _ : state) {
    Result<size_t> n = tier->Read(key, 0, dst, true);
    benchmark::DoNotOptimize(n);
  }
  state.SetBytesProcessed(state.iterations() * kBlockSize);
}
BENCHMARK(BM_MemoryTierRead4MiB);

// What a miss costs the tier: the fetched bytes copied into a new Block, then Insert, which evicts
// an older block once the tier is full (16 blocks). LRU, so that every insert stores and evicts
// (the default policy would turn most of these one-time blocks away).
void BM_MemoryTierInsert4MiB(benchmark::State& state) {
  auto tier = Must(MemoryTier::Create(16 * kBlockSize, "lru"));
  std::span<char> src = Buffer(0);
  uint64_t next = 0;
  for (auto _ : state) {
    std::shared_ptr<Block> block = Block::Allocate(kBlockSize);
    std::memcpy(block->mutable_data(), src.data(), kBlockSize);
    benchmark::DoNotOptimize(tier->Insert(RequestFor(next++), block));
  }
  state.SetBytesProcessed(state.iterations() * kBlockSize);
  state.counters["inserted"] = static_cast<double>(tier->Stats().inserts);
}
BENCHMARK(BM_MemoryTierInsert4MiB);

// ---- (c) Disk tier vs plain files, 4 MiB, same directory, warm page cache ----

class DiskBench {
 public:
  static DiskBench& Get() {
    static DiskBench bench;
    return bench;
  }
  DiskTier& tier() { return *tier_; }
  const std::string& dir() const { return dir_; }
  int plain_fd(uint64_t i) const { return plain_fds_[i]; }
  std::string PlainPath(uint64_t i) const { return dir_ + "/plain/" + std::to_string(i); }

  ~DiskBench() {
    for (int fd : plain_fds_) ::close(fd);
    tier_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

 private:
  DiskBench() {
    char tmpl[] = "/var/tmp/lakecache_bench.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) std::exit(1);
    dir_ = tmpl;
    DiskCacheConfig config{
        .path = dir_ + "/cache", .capacity = 64 * kBlockSize, .min_free_ratio = 0};
    tier_ = Must(DiskTier::Open({config}, kDefaultEvictionPolicy));
    std::filesystem::create_directories(dir_ + "/plain");
    std::shared_ptr<Block> block = FilledBlock(kBlockSize, 5);
    for (uint64_t i = 0; i < kDiskBlocks; ++i) {
      if (!tier_->Insert(RequestFor(i), block)) std::exit(1);
      WritePlain(PlainPath(i), block->data());
      plain_fds_.push_back(::open(PlainPath(i).c_str(), O_RDONLY | O_CLOEXEC));
    }
  }
  static void WritePlain(const std::string& path, const char* data) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || ::pwrite(fd, data, kBlockSize, 0) != static_cast<ssize_t>(kBlockSize)) {
      std::exit(1);
    }
    ::close(fd);
  }

  std::string dir_;
  std::unique_ptr<DiskTier> tier_;
  std::vector<int> plain_fds_;
};

void BM_Pread4MiB(benchmark::State& state) {
  DiskBench& bench = DiskBench::Get();
  std::span<char> dst = Buffer(1);
  uint64_t i = 0;
  for (auto _ : state) {
    ssize_t n = ::pread(bench.plain_fd(i++ % kDiskBlocks), dst.data(), kBlockSize, 0);
    if (n != static_cast<ssize_t>(kBlockSize)) state.SkipWithError("short pread");
  }
  state.SetBytesProcessed(state.iterations() * kBlockSize);
}
BENCHMARK(BM_Pread4MiB);

// The disk tier opens the block's file on every read; this is the same with plain files.
void BM_OpenPreadClose4MiB(benchmark::State& state) {
  DiskBench& bench = DiskBench::Get();
  std::span<char> dst = Buffer(1);
  uint64_t i = 0;
  for (auto _ : state) {
    int fd = ::open(bench.PlainPath(i++ % kDiskBlocks).c_str(), O_RDONLY | O_CLOEXEC);
    ssize_t n = ::pread(fd, dst.data(), kBlockSize, 0);
    ::close(fd);
    if (n != static_cast<ssize_t>(kBlockSize)) state.SkipWithError("short pread");
  }
  state.SetBytesProcessed(state.iterations() * kBlockSize);
}
BENCHMARK(BM_OpenPreadClose4MiB);

void BM_DiskTierRead4MiB(benchmark::State& state) {
  DiskBench& bench = DiskBench::Get();
  std::span<char> dst = Buffer(1);
  uint64_t i = 0;
  for (auto _ : state) {
    Result<size_t> n = bench.tier().Read(RequestFor(i++ % kDiskBlocks).key, 0, dst, true);
    if (!n.ok() || *n != kBlockSize) state.SkipWithError("disk tier read failed");
  }
  state.SetBytesProcessed(state.iterations() * kBlockSize);
}
BENCHMARK(BM_DiskTierRead4MiB);

// A new file per block, and the one written 16 blocks earlier removed, as the tier does once full.
void BM_WriteFile4MiB(benchmark::State& state) {
  DiskBench& bench = DiskBench::Get();
  std::span<char> src = Buffer(0);
  uint64_t next = 0;
  for (auto _ : state) {
    std::string path = bench.dir() + "/plain/w" + std::to_string(next);
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ssize_t n = ::pwrite(fd, src.data(), kBlockSize, 0);
    ::close(fd);
    if (n != static_cast<ssize_t>(kBlockSize)) state.SkipWithError("short write");
    if (next >= 16) ::unlink((bench.dir() + "/plain/w" + std::to_string(next - 16)).c_str());
    ++next;
  }
  state.SetBytesProcessed(state.iterations() * kBlockSize);
}
BENCHMARK(BM_WriteFile4MiB);

// Insert of new blocks into a full tier of its own: checksums, header, temp file, rename, and an
// eviction (unlink) per block. LRU, so that every insert writes.
void BM_DiskTierInsert4MiB(benchmark::State& state) {
  DiskBench& bench = DiskBench::Get();
  DiskCacheConfig config{
      .path = bench.dir() + "/insert-cache", .capacity = 16 * kBlockSize, .min_free_ratio = 0};
  std::unique_ptr<DiskTier> tier = Must(DiskTier::Open({config}, "lru"));
  std::shared_ptr<Block> block = FilledBlock(kBlockSize, 9);
  static uint64_t next = 0;  // new keys across the runs, which reopen the same directory
  uint64_t admitted = 0;
  for (auto _ : state) admitted += tier->Insert(RequestFor(next++), block) ? 1 : 0;
  state.SetBytesProcessed(state.iterations() * kBlockSize);
  state.counters["admitted"] = static_cast<double>(admitted);
}
BENCHMARK(BM_DiskTierInsert4MiB);

}  // namespace
}  // namespace lakecache

BENCHMARK_MAIN();
