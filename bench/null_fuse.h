// A null read-only FUSE file system for the ceiling benchmarks: one file MOUNTPOINT/data of a given
// size, mounted with the options of our mount (libfuse3 low level, ro, max_read 1 MiB,
// multi-threaded loop with clone_fd). Where its bytes come from is the caller's: every read goes to
// a NullFuseRead, called on the FUSE loop's threads at once, which must end the request in exactly
// one fuse_reply_*. Also the pattern bytes both ceilings serve and the size parser of their flags.
#pragma once

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <cstddef>
#include <functional>
#include <string>

namespace lakecache::bench {

constexpr size_t kMaxRead = size_t{1} << 20;  // our mount's max_read

// Serves `length` bytes (at most kMaxRead, never past the end of the file) from `offset`.
using NullFuseRead = std::function<void(fuse_req_t req, size_t offset, size_t length)>;

struct NullFuseOptions {
  std::string name;  // fsname and subtype, and the prefix of its messages
  size_t size = 0;
  bool keep_cache = false;
  unsigned threads = 16;  // FuseMountOptions::max_threads
};

// Mounts at `mountpoint` and serves until unmounted or SIGTERM/SIGINT/SIGHUP; the exit status for
// main (0 after a clean unmount or a signal, 1 when mounting failed).
int RunNullFuse(const std::string& mountpoint, const NullFuseOptions& options, NullFuseRead read);

// The mount and loop of RunNullFuse for any handlers: mounts a session of `ops` (with `userdata`)
// at `mountpoint` with the mount options `mount_options` ("ro,fsname=...,max_read=..."), calls
// `on_mounted` once the mount is visible, and serves with libfuse's multi-threaded loop (clone_fd,
// at most `threads` threads) until unmounted or SIGTERM/SIGINT/SIGHUP. `name` prefixes its
// messages. The exit status for main, as RunNullFuse's.
int ServeFuse(const std::string& name, const std::string& mountpoint,
              const std::string& mount_options, const fuse_lowlevel_ops& ops, void* userdata,
              unsigned threads, const std::function<void()>& on_mounted);

// Fills `out` with the bytes of the file from `offset` on: a 4 KiB pattern of letters, repeated.
void FillPattern(char* out, size_t offset, size_t length);

// "512MiB", "1G", "4096": bytes (K/M/G and KiB/MiB/GiB are powers of 2); false when malformed.
bool ParseSize(const char* text, size_t* out);

}  // namespace lakecache::bench
