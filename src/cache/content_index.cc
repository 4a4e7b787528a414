#include "cache/content_index.h"

#include <algorithm>
#include <map>
#include <unordered_set>

#include "cache/block_store.h"

namespace lakecache {

void ContentIndex::Note(std::string_view ns, const ContentId& content, uint64_t object_size,
                        uint64_t block_size) {
  MutexLock lock(&mu_);
  auto it = versions_.find(content);
  if (it != versions_.end()) return;
  auto name = std::find(names_.begin(), names_.end(), ns);
  if (name == names_.end()) name = names_.insert(names_.end(), std::string(ns));
  versions_.emplace(content,
                    Version{static_cast<uint32_t>(name - names_.begin()), object_size, block_size});
}

std::vector<ContentIndex::Usage> ContentIndex::CachedBytes(const BlockStore& store) const {
  std::unordered_map<ContentId, Version, ContentHash> versions;
  std::vector<std::string> names;
  {
    MutexLock lock(&mu_);
    versions = versions_;
    names = names_;
  }
  std::map<std::string, Usage> by_ns;
  for (const std::string& n : names) by_ns[n].ns = n;
  auto count = [&](const Version& v, uint64_t index) {
    Usage& usage = by_ns[names[v.ns]];
    usage.cached_bytes += std::min(v.block_size, v.object_size - index * v.block_size);
    ++usage.blocks;
  };
  // The sizes of a version come from whoever named it (a worker's clients), so walking every
  // block they claim could take ~2^64 steps. The blocks the store holds are looked up instead
  // when its tiers can list them (a worker's can); a mount's tiers that stand for the node's
  // worker cannot, and its own readers name versions with the sizes its metadata holds.
  std::unordered_set<BlockKey, BlockKeyHash> held;
  bool listed = store.ForEachHeld([&](const BlockKey& key) {
    if (versions.contains(key.content)) held.insert(key);
  });
  if (listed) {
    for (const BlockKey& key : held) {
      const Version& v = versions.at(key.content);
      if (key.index < v.blocks()) count(v, key.index);
    }
  } else {
    for (const auto& [content, v] : versions) {
      for (uint64_t index = 0, n = v.blocks(); index < n; ++index) {
        if (store.Contains(BlockKey{content, index})) count(v, index);
      }
    }
  }
  std::vector<Usage> out;
  for (auto& [name, usage] : by_ns) out.push_back(std::move(usage));
  return out;
}

}  // namespace lakecache
