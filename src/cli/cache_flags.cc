#include "cli/cache_flags.h"

#include <utility>

#include "common/units.h"

namespace lakecache {
namespace {

// A size flag that must be more than zero.
Status ParseSizeFlag(std::string_view flag, const std::string& text, uint64_t* out) {
  Result<uint64_t> bytes = ParseByteSize(text);
  if (!bytes.ok())
    return Status::InvalidArgument(std::string(flag) + ": " + bytes.status().message());
  if (*bytes == 0) return Status::InvalidArgument(std::string(flag) + ": must be more than 0");
  *out = *bytes;
  return Status::Ok();
}

// --cache-dir (with --cache-size) replaces the disks; --cache-size alone resizes the one disk.
Status ApplyDiskFlags(const CacheFlags& flags, CacheConfig* cache) {
  uint64_t capacity = kDefaultCacheDirCapacity;
  if (!flags.cache_size.empty()) {
    LC_RETURN_IF_ERROR(ParseSizeFlag("--cache-size", flags.cache_size, &capacity));
  }
  if (flags.cache_dir.empty()) {
    if (flags.cache_size.empty()) return Status::Ok();
    if (cache->disks.size() != 1) {
      return Status::InvalidArgument(
          "--cache-size: needs --cache-dir, or exactly one directory in the config's cache.disks "
          "(it has " +
          std::to_string(cache->disks.size()) + ")");
    }
    cache->disks[0].capacity = capacity;
    return Status::Ok();
  }
  if (flags.cache_dir.front() != '/') {
    return Status::InvalidArgument("--cache-dir: '" + flags.cache_dir +
                                   "' is not an absolute path (e.g. " +
                                   std::string(kSuggestedCacheDir) + ")");
  }
  DiskCacheConfig disk;
  disk.path = flags.cache_dir;
  disk.capacity = capacity;
  cache->disks = {std::move(disk)};
  return Status::Ok();
}

}  // namespace

Status ApplyCacheFlags(const CacheFlags& flags, CacheConfig* cache) {
  CacheConfig updated = *cache;
  if (!flags.mem_cache.empty()) {
    LC_RETURN_IF_ERROR(ParseSizeFlag("--mem-cache", flags.mem_cache, &updated.memory_capacity));
  }
  LC_RETURN_IF_ERROR(ApplyDiskFlags(flags, &updated));
  *cache = std::move(updated);
  return Status::Ok();
}

}  // namespace lakecache
