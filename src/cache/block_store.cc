#include "cache/block_store.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <utility>

#include "cache/block_file.h"
#include "cache/block_store_parts.h"
#include "cache/disk_tier.h"
#include "cache/memory_tier.h"

namespace lakecache {

namespace {

constexpr uint64_t kDefaultBudget = kDefaultMemoryBudget;
// Blocks queued for the disk writer, so readers never wait for the disk. They are mostly the memory
// tier's own blocks (shared, not copied); at worst this much more memory stays pinned.
constexpr uint64_t kDiskWriteBehindBytes = 32ull << 20;

uint64_t Load(const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); }

// "block 3 (bytes 12582912+4194304) of train/shard-0001.tfrecord"
std::string Describe(const BlockRequest& request) {
  return "block " + std::to_string(request.key.index) + " (bytes " +
         std::to_string(request.offset) + "+" + std::to_string(request.length) + ") of " +
         request.object_key;
}

// Copies the clamped range [offset, offset + dst.size()) of `block` into dst.
size_t CopyRange(const Block& block, uint64_t offset, std::span<char> dst) {
  if (offset >= block.size()) return 0;
  size_t n = std::min<uint64_t>(dst.size(), block.size() - offset);
  std::memcpy(dst.data(), block.data() + offset, n);
  return n;
}

}  // namespace

Result<std::unique_ptr<BlockStore>> BlockStore::Open(const CacheConfig& config,
                                                     std::shared_ptr<MemoryBudget> budget,
                                                     std::shared_ptr<ShmArena> arena) {
  std::vector<std::unique_ptr<CacheTier>> tiers;
  auto memory =
      MemoryTier::Create(config.memory_capacity, config.policy, /*seed=*/0, std::move(arena));
  if (!memory.ok()) return memory.status().WithContext("cache.policy");
  tiers.push_back(std::move(*memory));
  if (!config.disks.empty()) {
    auto disk = DiskTier::Open(config.disks, config.policy, /*seed=*/0, kDiskWriteBehindBytes);
    if (!disk.ok()) return disk.status().WithContext("cache.disks");
    tiers.push_back(std::move(*disk));
  }
  return std::make_unique<BlockStore>(std::move(tiers), std::move(budget));
}

BlockStore::BlockStore(std::vector<std::unique_ptr<CacheTier>> tiers,
                       std::shared_ptr<MemoryBudget> budget, const SteadyClock* clock)
    : tiers_(std::move(tiers)),
      budget_(budget != nullptr ? std::move(budget)
                                : std::make_shared<MemoryBudget>(kDefaultBudget)),
      clock_(clock),
      counters_(std::make_unique<Counters>()) {
  counters_->hit_bytes = std::make_unique<std::atomic<uint64_t>[]>(tiers_.size());
}

BlockStore::~BlockStore() {
  MutexLock lock(&staging_mu_);
  for (const auto& [key, staged] : staging_) budget_->Release(staged.block->size());
}

BlockRef BlockStore::Lookup(const BlockRequest& request) {
  for (size_t i = 0; i < tiers_.size(); ++i) {
    // Any tier error (a failing disk) is a miss there: the block can still come from elsewhere.
    Result<BlockRef> hit = tiers_[i]->Get(request.key);
    if (!hit.ok()) continue;
    Counters::Add(counters_->hit_bytes[i], (*hit)->size());
    TouchBelow(i, request.key);
    Offer(request, *hit, i);
    return std::move(hit).value();
  }
  return nullptr;
}

bool BlockStore::Shadowed(const BlockKey& key) const {
  return std::any_of(tiers_.begin(), tiers_.end(),
                     [&key](const auto& tier) { return tier->Shadows(key); });
}

bool BlockStore::HasRoomInMemory(uint64_t bytes) const {
  return std::any_of(tiers_.begin(), tiers_.end(), [bytes](const auto& tier) {
    return tier->resident() && tier->HasRoom(bytes);
  });
}

void BlockStore::Offer(const BlockRequest& request, const BlockRef& block, size_t end) {
  if (Shadowed(request.key)) return;
  for (size_t i = 0; i < end; ++i) tiers_[i]->Insert(request, block);
}

void BlockStore::Admit(const BlockRequest& request, const BlockRef& block) {
  if (Contains(request.key)) return;
  Offer(request, block, tiers_.size());
}

Result<BlockRef> BlockStore::Get(const BlockRequest& request, const BlockSource& source) {
  if (BlockRef block = Lookup(request)) return block;
  if (BlockRef block = AdmitStaged(request)) return block;
  return Fetch(request, source);
}

Result<size_t> BlockStore::Read(const BlockRequest& request, uint64_t offset, std::span<char> dst,
                                const BlockSource& source) {
  LC_ASSIGN_OR_RETURN(PinnedRead read, ReadPinned(request, offset, dst, source));
  if (read.block == nullptr) return read.copied;
  return CopyRange(*read.block, offset, dst);
}

Result<BlockStore::PinnedRead> BlockStore::ReadPinned(const BlockRequest& request, uint64_t offset,
                                                      std::span<char> dst,
                                                      const BlockSource& source) {
  const bool count = !request.repeat_access;
  // Memory first, then staging (read-ahead may have loaded a disk block there), then a read-ahead
  // of this block still in flight, then the disk: a reader never reads the disk for a block that
  // read-ahead is already bringing in.
  for (size_t i = 0; i < tiers_.size(); ++i) {
    if (!tiers_[i]->resident()) continue;
    BlockRef block = tiers_[i]->Pin(request.key, count);
    if (block == nullptr) continue;
    // This read's bytes; a caller that serves more reads from the block counts them
    // (CountHitBytes with PinnedRead::tier).
    if (offset < block->size()) {
      Counters::Add(counters_->hit_bytes[i],
                    std::min<uint64_t>(dst.size(), block->size() - offset));
    }
    if (count) TouchBelow(i, request.key);
    return PinnedRead{std::move(block), 0, static_cast<int>(i)};
  }
  if (BlockRef block = AdmitStaged(request))
    return PinnedRead{Shared(request.key, std::move(block)), 0};
  if (InFlight(request.key)) {
    LC_ASSIGN_OR_RETURN(BlockRef block, Fetch(request, source));  // joins it
    return PinnedRead{Shared(request.key, std::move(block)), 0};
  }
  for (size_t i = 0; i < tiers_.size(); ++i) {
    if (tiers_[i]->resident()) continue;
    if (count && request.length <= kSmallBlockMax) {
      // A small block (a small file's one block) is read whole: one disk read, where reading
      // each FUSE request's range would open and read the file again for every request; and it
      // is offered to the memory tiers, so the rest of the file and later passes hit memory.
      // (A repeat access reads its range: Get would count it as another access.)
      Result<BlockRef> block = tiers_[i]->Get(request.key);
      if (!block.ok()) continue;
      if (offset < (*block)->size()) {
        Counters::Add(counters_->hit_bytes[i],
                      std::min<uint64_t>(dst.size(), (*block)->size() - offset));
      }
      TouchBelow(i, request.key);
      Offer(request, *block, i);
      return PinnedRead{std::move(block).value(), 0, static_cast<int>(i)};
    }
    Result<size_t> hit = tiers_[i]->Read(request.key, offset, dst, count);
    if (!hit.ok()) continue;
    Counters::Add(counters_->hit_bytes[i], *hit);
    if (count) TouchBelow(i, request.key);
    return PinnedRead{nullptr, *hit};
  }
  if (BlockRef block = AdmitStaged(request))
    return PinnedRead{Shared(request.key, std::move(block)), 0};
  LC_ASSIGN_OR_RETURN(BlockRef block, Fetch(request, source));
  return PinnedRead{Shared(request.key, std::move(block)), 0};
}

std::shared_ptr<Block> BlockStore::NewBlock(size_t size) {
  for (const auto& tier : tiers_) {
    if (!tier->resident()) continue;
    if (std::shared_ptr<Block> block = tier->NewBlock(size)) return block;
  }
  return Block::Allocate(size);
}

std::unique_ptr<ReaderHolds> BlockStore::NewReaderHolds() {
  for (const auto& tier : tiers_) {
    if (std::unique_ptr<ReaderHolds> holds = tier->NewReaderHolds()) return holds;
  }
  return nullptr;
}

BlockRef BlockStore::Shared(const BlockKey& key, BlockRef block) {
  if (block == nullptr || block->fd() >= 0) return block;
  for (const auto& tier : tiers_) {
    if (!tier->resident()) continue;
    if (BlockRef shared = tier->SharedCopy(key);
        shared != nullptr && shared->size() == block->size()) {
      return shared;
    }
  }
  return block;
}

bool BlockStore::InFlight(const BlockKey& key) {
  MutexLock lock(&flights_mu_);
  return flights_.contains(key);
}

void BlockStore::TouchBelow(size_t tier, const BlockKey& key) {
  for (size_t below = tier + 1; below < tiers_.size(); ++below) tiers_[below]->Touch(key);
}

Result<BlockRef> BlockStore::Fetch(const BlockRequest& request, const BlockSource& source) {
  std::shared_ptr<Flight> flight;
  bool leader = false;
  {
    MutexLock lock(&flights_mu_);
    auto [it, inserted] = flights_.try_emplace(request.key);
    if (inserted) it->second = std::make_shared<Flight>();
    flight = it->second;
    leader = inserted;
  }
  if (!leader) {
    Counters::Add(counters_->singleflight_waits);
    Result<BlockRef> result = flight->Wait();
    // A prefetch left it in staging: this read is its first access, so admit it now.
    if (result.ok() && flight->prefetch) AdmitStaged(request);
    return result;
  }
  Result<BlockRef> result = LeadFetch(request, source);
  {
    MutexLock lock(&flights_mu_);
    flights_.erase(request.key);
  }
  flight->Finish(result);
  return result;
}

Result<BlockRef> BlockStore::LeadFetch(const BlockRequest& request, const BlockSource& source) {
  // A flight that ended between our tier lookups and now has stored the block already (tiers are
  // filled before a flight is removed), so look again before calling the source a second time.
  if (Contains(request.key)) {
    if (BlockRef block = Lookup(request)) return block;  // unless evicted meanwhile
  }
  if (BlockRef block = AdmitStaged(request)) return block;  // likewise for a prefetch
  // Counted so that read-ahead backs off, but never refused: a reader always gets its bytes.
  budget_->ForceAcquire(request.length);
  Result<BlockRef> fetched = CallSource(request, source, "miss: fetch");
  budget_->Release(request.length);
  LC_ASSIGN_OR_RETURN(BlockRef block, std::move(fetched));
  // Each tier's policy decides; a tier that cannot store it (disk full) only counts that.
  Offer(request, block, tiers_.size());
  return block;
}

Result<BlockRef> BlockStore::CallSource(const BlockRequest& request, const BlockSource& source,
                                        std::string_view what) {
  auto start = std::chrono::steady_clock::now();
  std::optional<Result<BlockRef>> fetched;
  try {
    fetched.emplace(source(request));
  } catch (const std::exception& e) {
    // Waiters must be released whatever the source does; an exception is a bug in it.
    fetched.emplace(Status::Internal(Describe(request) + ": block source threw: " + e.what()));
  } catch (...) {
    fetched.emplace(Status::Internal(Describe(request) + ": block source threw"));
  }
  auto took = std::chrono::steady_clock::now() - start;
  counters_->AddLatency(took);
  Counters::Add(counters_->fetches);
  Result<BlockRef>& result = *fetched;
  if (result.ok()) {
    const BlockRef& block = *result;
    uint64_t got = block == nullptr ? 0 : block->size();
    if (block == nullptr || got != request.length) {
      result =
          Status::Internal(Describe(request) + ": block source returned " + std::to_string(got) +
                           " bytes, expected " + std::to_string(request.length));
    }
  }
  if (spdlog::should_log(spdlog::level::debug)) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
    spdlog::debug("{} of {}: {} ms{}", what, Describe(request), ms,
                  result.ok() ? "" : ", failed: " + result.status().ToString());
  }
  if (!result.ok()) {
    Counters::Add(counters_->fetch_errors);
    return result.status();
  }
  Counters::Add(counters_->fetched_bytes, request.length);
  return std::move(result);
}

bool BlockStore::Contains(const BlockKey& key) const {
  return std::any_of(tiers_.begin(), tiers_.end(),
                     [&key](const auto& tier) { return tier->Contains(key); });
}

bool BlockStore::ForEachHeld(const std::function<void(const BlockKey&)>& fn) const {
  return std::all_of(tiers_.begin(), tiers_.end(),
                     [&fn](const auto& tier) { return tier->ForEachKey(fn); });
}

void BlockStore::Erase(const BlockKey& key) {
  for (const auto& tier : tiers_) tier->Erase(key);
}

std::string BlockStore::FilePath(const BlockKey& key) {
  for (const auto& tier : tiers_) {
    std::string path = tier->FilePath(key);
    if (!path.empty()) return path;
  }
  return "";
}

void BlockStore::Flush() {
  for (const auto& tier : tiers_) tier->Flush();
}

void BlockStore::CountHitBytes(int tier, uint64_t bytes) {
  if (tier >= 0 && static_cast<size_t>(tier) < tiers_.size()) {
    Counters::Add(counters_->hit_bytes[tier], bytes);
  }
}

BlockStoreStats BlockStore::Stats() const {
  BlockStoreStats stats;
  const Counters& c = *counters_;
  for (size_t i = 0; i < tiers_.size(); ++i) {
    stats.tiers.push_back(tiers_[i]->Stats());
    stats.tiers.back().hit_bytes = Load(c.hit_bytes[i]);
  }
  stats.fetches = Load(c.fetches);
  stats.fetch_errors = Load(c.fetch_errors);
  stats.fetched_bytes = Load(c.fetched_bytes);
  stats.singleflight_waits = Load(c.singleflight_waits);
  stats.prefetches = Load(c.prefetches);
  stats.prefetch_used = Load(c.prefetch_used);
  stats.prefetch_dropped = Load(c.prefetch_dropped);
  stats.prefetch_refused = Load(c.prefetch_refused);
  stats.budget_peak_bytes = budget_->peak();
  for (const auto& bucket : c.latency_us_log2) stats.fetch_latency_us_log2.push_back(Load(bucket));
  stats.fetch_latency_us_total = Load(c.latency_us_total);
  return stats;
}

}  // namespace lakecache
