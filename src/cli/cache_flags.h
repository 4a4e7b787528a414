// CacheFlags: the cache options of `lakecache mount` (--mem-cache, --cache-dir, --cache-size),
// applied on top of the config file's `cache` section.
//
// Flags win over the file. --cache-dir replaces the configured disks with that one directory, whose
// capacity is --cache-size (default 10GiB); the free-space floor keeps its 5% default. Errors name
// the flag. Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/config.h"
#include "common/status.h"

namespace lakecache {

// Each field holds the flag's text as given; empty means the flag was not given.
struct CacheFlags {
  std::string mem_cache;  // --mem-cache SIZE: memory tier capacity
  std::string cache_dir;  // --cache-dir DIR: absolute path of the one disk-tier directory
  std::string
      cache_size;  // --cache-size SIZE: capacity of --cache-dir, or of the one configured disk
};

inline constexpr uint64_t kDefaultCacheDirCapacity = 10ull << 30;
// Where the docs and --help suggest putting a cache directory; nothing uses it implicitly.
inline constexpr std::string_view kSuggestedCacheDir = "/var/cache/lakecache";

// On error `cache` is left unchanged.
Status ApplyCacheFlags(const CacheFlags& flags, CacheConfig* cache);

}  // namespace lakecache
