// Helpers for tests that make real FUSE mounts: is a path mounted, and unmount it whatever
// happened.
#pragma once

#include <string>

#include "common/status.h"

namespace lakecache::testing {

// True when /proc/mounts lists `path` as a mountpoint.
bool IsMounted(const std::string& path);

// Unmounts `path` if it is mounted: `lakecache umount`, then a lazy `fusermount3 -u -z` if that
// left it mounted. Returns an error (naming what `lakecache umount` said) only in that second case,
// so tests can report a failing umount while still leaving nothing behind.
Status UnmountForTest(const std::string& path);

}  // namespace lakecache::testing
