// The client library's internals (lakecache_native.h is its interface): a client's session with
// the mount's server, its files, and the pieces reads are cut into. Internal to native_client/.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "native/native_ring.h"
#include "native/native_socket.h"
#include "native/native_wire.h"
#include "native_client/lakecache_native.h"

namespace lcn {

using lakecache::native::Cqe;
using lakecache::native::Sqe;
namespace wire = lakecache::native;

// Records the failure for lc_last_error: -1 with errno = `err`.
int Fail(int err, std::string message);
const char* LastError();

struct Mapping {
  const char* data = nullptr;
  size_t bytes = 0;
  bool shared = false;  // one of MapArena's: UnmapArena lets go of it
};

// The node's memory this process maps, one read-only mapping per arena (by device and inode)
// whichever of its clients (one per reader thread, as a rule) it came to: mapped and populated
// once, unmapped when the last client lets go of it. Thread-safe.
Mapping MapArena(int fd, size_t bytes);  // data null (errno set) when it cannot be mapped
void UnmapArena(const Mapping& m);
// Maps the pages of [offset, offset + length) of `m` (MADV_POPULATE_READ, 4 MiB at a time, once
// per process) before they are read: one call for them instead of a fault per 64 KiB.
void Populate(const Mapping& m, uint64_t offset, uint64_t length);
// fork() handlers of the mapping registry: held across the fork; in the child, a fresh lock and
// nothing marked populated (a child inherits the mappings, not their page tables).
void LockArenas();
void UnlockArenas();
void ArenasAfterFork();

// One block-sized (or shorter) read of a batch.
struct Piece {
  size_t read = 0;  // index of the lc_read (or of the caller's request)
  uint64_t offset = 0;
  uint64_t length = 0;
  char* dst = nullptr;  // copy here; null: keep the view (lc_view_range)
  bool done = false;
  int64_t result = 0;
  const char* view = nullptr;
  uint64_t anchor = 0;
  uint64_t session = 0;  // the client's session the view came from
};

// The socket's path the mount's control file `.lakecache/native` in `dir` names, or empty.
std::string SocketNamedIn(const std::string& dir);

// Counts fork()s into this process's line (a child's count is its parent's plus one): a client
// attached under another count belongs to another process. Cheaper than getpid() per call.
uint64_t ForkGeneration();

// What a read's -errno means for the reader.
std::string ReadError(int64_t result);

}  // namespace lcn

struct lc_file {
  lc_client* client = nullptr;
  std::string path;  // inside the mount; empty when opened by descriptor
  int fd = -1;       // a duplicate of the caller's descriptor, to open it again after a restart
  uint32_t id = 0;
  uint64_t session = 0;  // the session `id` belongs to
  uint64_t size = 0;
  uint64_t block_size = 0;
  uint64_t version = 0;  // the object version's hash the server gave
};

struct lc_client {
  std::recursive_mutex mu;
  pid_t pid = 0;
  uint64_t generation = 0;  // lcn::ForkGeneration() when it attached
  bool Ours() const { return generation == lcn::ForkGeneration(); }
  std::string mountpoint;
  std::string socket_path;
  int sock = -1, submit = -1, complete = -1;
  lcn::wire::RingMapping ring;
  lcn::wire::RingClientState rs;
  lcn::Mapping staging;
  std::unordered_map<uint32_t, lcn::Mapping> arenas;
  std::vector<lcn::Mapping> retired;  // of ended sessions: views handed out stay readable
  // Descriptors the server gave to keep (kHold): this reader's sessions with co-located workers,
  // which hold the worker's memory its views show. Kept after the server's session ends (a
  // crash, a takeover) until the views handed out in it are released.
  std::vector<int> keep;
  uint64_t views = 0;  // views of this session not released
  struct Kept {
    std::vector<int> fds;
    uint64_t views = 0;
  };
  std::unordered_map<uint64_t, Kept> kept;  // of ended sessions, by Token's session bits
  uint32_t max_read = 0;
  uint64_t anchor_bytes = 0;
  uint64_t session = 0;  // counts attachments
  uint64_t next_request = 1;
  std::set<lc_file*> files;
  std::vector<std::string> read_errors;  // of the last lc_read_many

  ~lc_client() { Drop(false); }

  // Forgets the session; with `unmap`, its mappings too (else they are kept for views).
  void Drop(bool keep_views_only) {
    // Descriptors the server sent just before it went (kHold) are taken first.
    if (keep_views_only && sock >= 0 && Ours()) (void)PumpSocket(false, 0, nullptr);
    for (int* fd : {&sock, &submit, &complete}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
    ring.Unmap();
    rs = {};
    if (staging.data != nullptr) retired.push_back(staging);
    for (auto& [id, m] : arenas) retired.push_back(m);
    staging = {};
    arenas.clear();
    if (!keep.empty() && views > 0 && keep_views_only) {
      Kept& k = kept[session & 0xffff];
      k.fds.insert(k.fds.end(), keep.begin(), keep.end());
      k.views += views;
    } else {
      for (int fd : keep) ::close(fd);
    }
    keep.clear();
    views = 0;
    if (!keep_views_only) {
      for (auto& [tag, k] : kept) {
        for (int fd : k.fds) ::close(fd);
      }
      kept.clear();
      for (lcn::Mapping& m : retired) {
        if (m.shared) {
          lcn::UnmapArena(m);
        } else {
          ::munmap(const_cast<char*>(m.data), m.bytes);
        }
      }
      retired.clear();
    }
  }

  int Connect();
  int Attach();
  int EnsureAttached();
  int Reopen(lc_file* f);
  int Exchange(const std::string& request, std::vector<char>* answer);
  int HandleMessage(const char* data, size_t size, int* fds, size_t nfds, uint64_t want_request,
                    std::vector<char>* answer);
  int PumpSocket(bool block, uint64_t want_request, std::vector<char>* answer);
  int OpenPaths(const std::vector<std::string>& paths, std::vector<lc_file*>* out,
                std::vector<std::string>* errors);
  // Runs `pieces` of reads of `files` (pieces[i].read indexes files) to completion: each piece
  // ends done with its result (bytes or -errno). When the session ends under it (the server
  // restarted or was taken over) it attaches again and runs what was not done. -1 only when the
  // client cannot attach at all.
  int Run(std::vector<lc_file*>& files, std::vector<lcn::Piece>& pieces);
  // Cuts a read of `file` into pieces that end where blocks end, so they run in parallel.
  void Split(const lc_file* file, size_t read, uint64_t offset, uint64_t length, char* dst,
             std::vector<lcn::Piece>* pieces) const;
  void Release(uint64_t anchor);
  void CloseIds(const std::vector<uint32_t>& ids);  // the server's files of this session
  // Whether the server has hung up (never blocks).
  bool Ended() const;
  // A view's token: the server's anchor and the session it belongs to (a release of a view of an
  // earlier session is dropped: that session let go of it, and its number means another now).
  static uint64_t Token(uint64_t anchor, uint64_t of_session) {
    return ((of_session & 0xffff) << 48) | (anchor & ((1ull << 48) - 1));
  }
  // Wakes the server for requests just queued, unless it is looking at the ring anyway.
  void Kick() {
    if (!lcn::wire::ServerSleeps(ring)) return;
    uint64_t one = 1;
    (void)!::write(submit, &one, sizeof(one));
  }
  std::string Relative(const char* path) const;
};
