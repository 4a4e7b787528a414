// The FUSE adapter's request handlers: each takes what libfuse decoded, calls the FileSystem and
// ends in exactly one fuse_reply_*, its Status mapped to an errno (errno_map.h). What they share
// (the file system, the metrics, the read-ahead to raise) is the FuseContext every session of a
// FuseMount is given as its userdata. Internal to lakecache_fuse (fuse_mount.h is the interface).
#pragma once

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "common/metrics.h"
#include "fs/file_system.h"
#include "fuse/fuse_mount.h"
#include "fuse/readdirplus_policy.h"

namespace lakecache {

// The largest read and write; the max_read mount option must say the same.
inline constexpr size_t kFuseMaxRead = 1 << 20;

// How many operations are timed (fuse_ops.cc names them).
inline constexpr size_t kTimedFuseOps = 17;

// What every request's handler reaches through fuse_req_userdata: the file system and the
// mount's metrics (cells that record nothing when metrics are off).
struct FuseContext {
  explicit FuseContext(ReaddirplusMode mode) : readdirplus(mode) {}
  FileSystem* fs = nullptr;
  metrics::Registry* registry = nullptr;
  std::array<metrics::Histogram, kTimedFuseOps> durations;
  metrics::Counter read_bytes, written_bytes;
  // Replies of bytes that live in a file are spliced from it (FuseMountOptions::splice), when
  // they are at most `splice_max` bytes: libfuse splices a reply only through a pipe that holds it
  // whole, and otherwise copies it twice (into a buffer, then into the kernel). Larger replies are
  // written from the file's mapping: one copy, as a reply from memory.
  bool splice = true;
  size_t splice_max = 0;
  // The sysfs file of the mount's read-ahead and its KiB (see RaiseReadAhead); empty: left as it
  // is.
  std::string read_ahead_file;
  uint64_t read_ahead_kib = 0;
  std::once_flag read_ahead_once;
  // Which listed entries go with their attributes (FuseMountOptions::readdirplus).
  ReaddirplusPolicy readdirplus;
};

// A context for `fs` with the metrics and settings of `options`.
std::unique_ptr<FuseContext> NewFuseContext(FileSystem* fs, const FuseMountOptions& options);

// The handlers, for a session whose userdata is a FuseContext.
fuse_lowlevel_ops MakeFuseOps();

}  // namespace lakecache
