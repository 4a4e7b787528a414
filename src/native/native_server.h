// NativeServer: the mount's native data path, beside FUSE (the wire: native/native_wire.h).
//
// It listens on a Unix socket next to the mount's control socket. Each reader that connects (and
// whose uid may use the mount: the mount's own, root, or --allow-uid) gets a session: a request
// ring, two eventfds, a staging area and a thread that serves them. Files are opened for the
// reader through the FileSystem, as the kernel would open them through the mount for that process
// (permissions checked against the reader's uid and groups, or proven by a descriptor it opened
// through the mount), and read with FileSystem::ReadPinned, the FUSE read path itself: the same
// tiers, single-flight fetches, read-ahead, order hints and version rules. A block that lies in a
// memfd (a co-located worker's memory, or the mount's own memory tier) is answered by reference:
// the reader maps that memfd read-only and the session holds the block (an anchor) until the
// reader releases it. Anything else is copied into the session's staging area. A session ends when
// its socket closes (the reader exited or died): its files, anchors and memory go with it.
//
// Every field a reader writes is checked; a bad request gets an errno in its completion, a broken
// ring (indices out of range) ends that session. Memory is bounded whatever readers do: bytes
// copied for readers and not yet released stay within staging_budget over all sessions (a read
// past it gets ENOBUFS), each session's freed staging pages above 16 MiB go back to the system,
// and a session holds at most anchor_bytes (by reference or staged). Blocks held by reference are
// the tiers' own memory, not more of it. Thread-safe; the destructor ends every session.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"

namespace lakecache {

class FileSystem;

struct NativeServerOptions {
  std::string socket_path;
  std::string mountpoint;                  // descriptors readers send must be files of its device
  std::vector<uid_t> allow_uids;           // besides the server's own uid and root
  uint32_t sq_entries = 256;               // default ring size (a reader may ask for 16 to 4096)
  uint64_t staging_bytes = 64ull << 20;    // one session's staging area (virtual; see below)
  uint64_t staging_budget = 256ull << 20;  // staged bytes in use, all sessions together
  uint64_t anchor_bytes = 1ull << 30;      // held by one session, by reference or staged
  uint32_t max_sessions = 256;
  uint32_t max_files = 1u << 20;  // open at once per session
  size_t threads = 8;             // reads in flight across sessions
};

class NativeServer {
 public:
  static Result<std::unique_ptr<NativeServer>> Start(std::shared_ptr<FileSystem> fs,
                                                     const NativeServerOptions& options);
  ~NativeServer();
  NativeServer(const NativeServer&) = delete;
  NativeServer& operator=(const NativeServer&) = delete;

  const std::string& socket_path() const;

  struct Stats {
    uint64_t sessions = 0;        // attached now
    uint64_t sessions_total = 0;  // ever
    uint64_t held_bytes = 0;      // held by readers now (by reference or staged)
    uint64_t staged_bytes = 0;    // of which copied into staging areas
    uint64_t reads_by_reference = 0, bytes_by_reference = 0;
    uint64_t reads_copied = 0, bytes_copied = 0;
    uint64_t read_errors = 0;
  };
  Stats stats() const;

  struct Impl;

 private:
  explicit NativeServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace lakecache
