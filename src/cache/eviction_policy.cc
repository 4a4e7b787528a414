#include "cache/eviction_policy.h"

#include <spdlog/spdlog.h>

#include "cache/lru_policy.h"
#include "cache/tinylfu_policy.h"

namespace lakecache {

Result<std::unique_ptr<EvictionPolicy>> MakeEvictionPolicy(std::string_view name,
                                                           uint64_t capacity_bytes, uint64_t seed,
                                                           Admission admission) {
  std::unique_ptr<EvictionPolicy> policy;
  if (name == "lru") {
    policy = std::make_unique<LruPolicy>(capacity_bytes);
  } else if (name == "tinylfu") {
    policy = std::make_unique<TinyLfuPolicy>(capacity_bytes, seed, admission);
  } else {
    return Status::InvalidArgument("unknown eviction policy \"" + std::string(name) +
                                   "\"; valid: lru, tinylfu");
  }
  return policy;
}

void LogEvictions(std::string_view tier, const std::vector<BlockKey>& victims) {
  if (victims.empty() || !spdlog::should_log(spdlog::level::debug)) return;
  for (const BlockKey& key : victims) spdlog::debug("{} cache: evicted {}", tier, key.ToString());
}

}  // namespace lakecache
