#include "fuse/readdirplus_policy.h"

namespace lakecache {

Result<ReaddirplusMode> ParseReaddirplusMode(std::string_view text) {
  if (text == "adaptive") return ReaddirplusMode::kAdaptive;
  if (text == "always") return ReaddirplusMode::kAlways;
  if (text == "never") return ReaddirplusMode::kNever;
  return Status::InvalidArgument("readdirplus is adaptive, always or never, not '" +
                                 std::string(text) + "'");
}

void ReaddirplusPolicy::SentBare(uint64_t n) {
  uint64_t bare = bare_.fetch_add(n, std::memory_order_relaxed) + n;
  if (bare < kWindow || !bare_.compare_exchange_strong(bare, 0, std::memory_order_relaxed)) return;
  uint64_t lookups = lookups_.exchange(0, std::memory_order_relaxed);
  whole_.store(lookups * kLookupRatio > bare, std::memory_order_relaxed);
}

}  // namespace lakecache
