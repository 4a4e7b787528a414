#include "cache/content_index.h"

#include <algorithm>
#include <map>

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
  std::vector<std::pair<ContentId, Version>> versions;
  std::vector<std::string> names;
  {
    MutexLock lock(&mu_);
    versions.assign(versions_.begin(), versions_.end());
    names = names_;
  }
  std::map<std::string, Usage> by_ns;
  for (const std::string& n : names) by_ns[n].ns = n;
  for (const auto& [content, v] : versions) {
    if (v.block_size == 0) continue;
    Usage& usage = by_ns[names[v.ns]];
    for (uint64_t start = 0, index = 0; start < v.object_size; start += v.block_size, ++index) {
      if (!store.Contains(BlockKey{content, index})) continue;
      usage.cached_bytes += std::min(v.block_size, v.object_size - start);
      ++usage.blocks;
    }
  }
  std::vector<Usage> out;
  for (auto& [name, usage] : by_ns) out.push_back(std::move(usage));
  return out;
}

}  // namespace lakecache
