// What the native data path's server and its sessions share (native_server.h is the interface):
// the server's state, one reader's session and its staging area. Internal to native/.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cache/block.h"
#include "common/mutex.h"
#include "common/scoped_fd.h"
#include "common/thread_pool.h"
#include "fs/file_system.h"
#include "native/native_ring.h"
#include "native/native_server.h"
#include "native/native_wire.h"

namespace lakecache {

inline constexpr uint64_t kNativeStagingUnit = 64 * 1024;
// A session's staging pages below this stay resident when freed (they are written again soon);
// above it they go back to the system, so an idle session holds little.
inline constexpr uint64_t kNativeStagingResident = 4ull << 20;
inline constexpr uint32_t kNativeMaxRead = 16u << 20;  // one entry's bytes at most

// First fit over kNativeStagingUnit units. Not thread-safe.
class NativeStagingMap {
 public:
  explicit NativeStagingMap(uint64_t bytes) : used_(bytes / kNativeStagingUnit, false) {}
  std::optional<uint64_t> Allocate(uint64_t bytes) {
    size_t units = std::max<uint64_t>(1, (bytes + kNativeStagingUnit - 1) / kNativeStagingUnit);
    size_t run = 0;
    for (size_t i = 0; i < used_.size(); ++i) {
      run = used_[i] ? 0 : run + 1;
      if (run == units) {
        size_t first = i + 1 - units;
        std::fill(used_.begin() + first, used_.begin() + i + 1, true);
        return first * kNativeStagingUnit;
      }
    }
    return std::nullopt;
  }
  void Free(uint64_t offset, uint64_t bytes) {
    size_t first = offset / kNativeStagingUnit;
    size_t units = std::max<uint64_t>(1, (bytes + kNativeStagingUnit - 1) / kNativeStagingUnit);
    std::fill(used_.begin() + first, used_.begin() + first + units, false);
  }

 private:
  std::vector<bool> used_;
};

struct NativeServer::Impl {
  std::shared_ptr<FileSystem> fs;
  NativeServerOptions options;
  ScopedFd listener;
  ScopedFd stop;  // eventfd: readable once the server stops
  std::atomic<bool> stopping{false};
  std::unique_ptr<ThreadPool> pool;
  std::thread acceptor;
  Mutex mu;
  std::map<uint64_t, std::thread> threads GUARDED_BY(mu);
  std::vector<std::thread> finished GUARDED_BY(mu);
  std::atomic<uint64_t> live{0};
  std::atomic<uint64_t> staged{0};   // staging bytes in use, all sessions
  std::atomic<uint32_t> lookers{0};  // sessions looking at their ring before they sleep
  // Descriptors of other file systems readers sent, closed on a thread of their own (a close may
  // wait for another FUSE server for ever); false when too many wait already.
  bool CloseLater(int fd);
  struct Closer;
  std::shared_ptr<Closer> closer;  // its thread is detached at the end: it may never return
  uint32_t max_lookers = 1;        // the cores but one
  std::atomic<uint64_t> held{0};   // bytes readers hold, all sessions
  std::atomic<uint64_t> sessions_total{0};
  std::atomic<uint64_t> reads_by_reference{0}, bytes_by_reference{0};
  std::atomic<uint64_t> reads_copied{0}, bytes_copied{0}, read_errors{0};
  uint64_t next_session GUARDED_BY(mu) = 1;
  Mutex dev_mu;
  dev_t mount_dev GUARDED_BY(dev_mu) = 0;  // of descriptors readers send (0: not known yet)

  void Accept();
  void Serve(uint64_t id, ScopedFd sock);
};

// One reader's session. The session thread reads its socket and its ring; reads run on the pool
// and post their completions themselves.
struct NativeSession : std::enable_shared_from_this<NativeSession> {
  NativeServer::Impl* server = nullptr;
  ScopedFd sock, ring_fd, submit, complete, staging_fd;
  FileSystem::Reader reader;
  pid_t pid = 0;
  native::RingMapping ring;
  char* staging = nullptr;
  uint64_t staging_bytes = 0;

  struct File {
    uint32_t id = 0;
    uint64_t fh = 0;
    uint64_t size = 0;
    uint64_t block_size = 0;
  };
  struct Anchor {
    BlockRef block;  // by reference: held until released
    uint64_t bytes = 0;
    uint64_t staging_at = 0;  // copied: its range of staging
    bool staged = false;
  };

  Mutex mu;
  CondVar idle;  // in_flight fell to 0
  native::RingServerState state GUARDED_BY(mu);
  uint32_t in_flight GUARDED_BY(mu) = 0;
  std::unordered_map<uint32_t, File> files GUARDED_BY(mu);
  // Reads in flight per file id; a file closed meanwhile is released by its last read.
  std::unordered_map<uint32_t, uint32_t> file_reads GUARDED_BY(mu);
  std::unordered_map<uint32_t, uint64_t> closing GUARDED_BY(mu);  // id -> fh
  // Blocks go to this reader by reference only if it may read every file of the mount: a mapped
  // arena shows every block in it.
  bool by_reference = false;
  bool full = false;  // session thread: the last Drain left requests for want of completion room
  uint32_t next_file GUARDED_BY(mu) = 1;
  std::unordered_map<uint64_t, Anchor> anchors GUARDED_BY(mu);
  uint64_t next_anchor GUARDED_BY(mu) = 1;
  uint64_t anchored_bytes GUARDED_BY(mu) = 0;
  std::unique_ptr<NativeStagingMap> staging_map GUARDED_BY(mu);
  std::map<std::pair<dev_t, ino_t>, uint32_t> arenas GUARDED_BY(mu);
  uint32_t next_arena GUARDED_BY(mu) = 1;
  // This reader's holds on a co-located worker's memory, so that its views outlive this server
  // (a crash, a takeover); made at its first such block.
  Mutex holds_mu;
  std::unique_ptr<ReaderHolds> holds GUARDED_BY(holds_mu);
  bool holds_made GUARDED_BY(holds_mu) = false;
  Mutex send_mu;  // one message at a time on the socket

  ~NativeSession() {
    if (staging != nullptr) ::munmap(staging, staging_bytes);
  }

  Status Handshake();
  void Loop();
  void End();
  bool Serve();
  bool Drain();
  void HandleMessage(const char* data, size_t size, int* fds, size_t nfds);
  void OpenPaths(uint64_t request_id, const char* data, size_t size);
  void OpenFd(uint64_t request_id, int fd);
  void AddFile(uint64_t fh, native::OpenedFile* out, std::string* error);
  void Read(const native::Sqe& e, File file);
  void PostLocked(uint64_t user_data, int64_t result, uint32_t arena, uint64_t offset,
                  uint64_t anchor) REQUIRES(mu);
  // Ends a read of `file`: its completion (anchor: an Anchor to keep for the reader, or none when
  // bytes is null), the file's count of reads, a deferred release.
  void FinishRead(const native::Sqe& e, const File& file, int64_t result, uint32_t arena = 0,
                  uint64_t offset = 0, std::optional<Anchor> anchor = std::nullopt);
  void CloseFiles(const std::vector<uint32_t>& ids);
  void ReleaseLocked(uint64_t anchor) REQUIRES(mu);
  uint32_t ArenaIdLocked(int fd) REQUIRES(mu);
  // `pin` (holding the bytes of a read at `offset` of `fh`) as the reader may keep it: see
  // ReaderHolds::Hold; null: copy the bytes instead.
  BlockRef HoldForReader(uint64_t fh, uint64_t offset, BlockRef pin) EXCLUDES(holds_mu);
  // A reader that does not read its socket within the send timeout (Handshake) ends its session.
  bool Send(const void* data, size_t size, const int* fds = nullptr, size_t nfds = 0) {
    MutexLock lock(&send_mu);
    if (native::SendMessage(sock.get(), data, size, fds, nfds) == static_cast<ssize_t>(size)) {
      return true;
    }
    ::shutdown(sock.get(), SHUT_RDWR);
    return false;
  }
  void Refuse(const std::string& reason) {
    std::string msg(sizeof(native::MessageHeader), '\0');
    native::MessageHeader h;
    h.type = native::kRefused;
    std::memcpy(msg.data(), &h, sizeof(h));
    msg += reason;
    Send(msg.data(), msg.size());
  }
};

}  // namespace lakecache
