#include "cache/disk_tier.h"

#include <xxhash.h>

#include <cmath>
#include <utility>

#include "cache/cache_dir.h"

namespace lakecache {
namespace {

const Status& NotHeld() {
  static const Status miss = Status::NotFound("disk tier: block not held");
  return miss;
}

std::string TierName(const std::vector<DiskCacheConfig>& dirs) {
  std::string name = "disk:";
  for (size_t i = 0; i < dirs.size(); ++i) name += (i > 0 ? "," : "") + dirs[i].path;
  return name;
}

}  // namespace

Result<std::unique_ptr<DiskTier>> DiskTier::Open(const std::vector<DiskCacheConfig>& dirs,
                                                 std::string_view policy, uint64_t seed) {
  if (dirs.empty()) return Status::InvalidArgument("disk tier: no cache directories");
  std::unique_ptr<DiskTier> tier(new DiskTier(TierName(dirs)));
  for (const DiskCacheConfig& config : dirs) {
    LC_ASSIGN_OR_RETURN(std::unique_ptr<CacheDir> dir,
                        CacheDir::Open(config, policy, seed, &tier->counters_));
    tier->dirs_.push_back(std::move(dir));
    tier->dir_seeds_.push_back(XXH3_64bits(config.path.data(), config.path.size()));
  }
  return tier;
}

DiskTier::DiskTier(std::string name) : name_(std::move(name)) {}

DiskTier::~DiskTier() = default;

// Highest random weight, weighted: each directory scores w / -ln(u) for a per-directory uniform u,
// so a directory wins a share of keys proportional to its capacity.
CacheDir& DiskTier::Home(const BlockKey& key) const {
  if (dirs_.size() == 1) return *dirs_[0];
  size_t best = 0;
  double best_score = -1;
  for (size_t i = 0; i < dirs_.size(); ++i) {
    double weight = static_cast<double>(dirs_[i]->config().capacity);
    double u = (static_cast<double>(StableKeyHash(key, dir_seeds_[i]) >> 11) + 0.5) * 0x1p-53;
    double score = weight / -std::log(u);
    if (score > best_score) best = i, best_score = score;
  }
  return *dirs_[best];
}

Result<BlockRef> DiskTier::Get(const BlockKey& key) {
  for (const auto& dir : dirs_) {
    Result<BlockRef> block = dir->Get(key);
    if (block.ok()) {
      counters_.Add(counters_.hits);
      return block;
    }
  }
  counters_.Add(counters_.misses);
  return NotHeld();
}

Result<size_t> DiskTier::Read(const BlockKey& key, uint64_t offset, std::span<char> dst,
                              bool count_access) {
  for (const auto& dir : dirs_) {
    Result<size_t> n = dir->Read(key, offset, dst, count_access);
    if (n.ok()) {
      counters_.Add(counters_.hits);
      return n;
    }
  }
  counters_.Add(counters_.misses);
  return NotHeld();
}

bool DiskTier::Insert(const BlockRequest& request, const BlockRef& block) {
  if (block == nullptr) return false;
  if (Contains(request.key)) return true;  // a concurrent insert got here first
  return Home(request.key).Insert(request, *block);
}

void DiskTier::Touch(const BlockKey& key) {
  for (const auto& dir : dirs_) {
    if (dir->Touch(key)) return;
  }
}

bool DiskTier::Contains(const BlockKey& key) const {
  for (const auto& dir : dirs_) {
    if (dir->Contains(key)) return true;
  }
  return false;
}

void DiskTier::Erase(const BlockKey& key) {
  for (const auto& dir : dirs_) dir->Erase(key);
}

TierStats DiskTier::Stats() const {
  TierStats stats;
  stats.tier = name_;
  counters_.CopyTo(&stats);
  for (const auto& dir : dirs_) {
    stats.used_bytes += dir->used_bytes();
    stats.capacity_bytes += dir->capacity_bytes();
    stats.blocks += dir->blocks();
  }
  return stats;
}

}  // namespace lakecache
