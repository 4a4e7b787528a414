#include "native/native_server.h"

#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <map>
#include <thread>
#include <unordered_map>

#include "common/errno_map.h"
#include "common/mutex.h"
#include "common/scoped_fd.h"
#include "common/thread_pool.h"
#include "fs/file_system.h"
#include "native/native_ring.h"
#include "native/native_socket.h"
#include "native/native_wire.h"
#include "rpc/unix_socket.h"

namespace lakecache {

using native::Cqe;
using native::Sqe;

namespace {

constexpr uint64_t kStagingUnit = 64 * 1024;
// A session's staging pages below this stay resident when freed (they are written again soon);
// above it they go back to the system, so an idle session holds little.
constexpr uint64_t kStagingResident = 16ull << 20;
constexpr uint32_t kMaxRead = 16u << 20;  // one entry's bytes at most (a block may be larger)
constexpr auto kHelloTimeout = std::chrono::seconds(5);
constexpr size_t kMaxOpenPerMessage = 1024;
constexpr size_t kMaxErrorText = 160;

Result<ScopedFd> Memfd(const char* name, uint64_t bytes) {
  ScopedFd fd(::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return Status::IoErrorFromErrno("memfd_create");
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
    return Status::IoErrorFromErrno("ftruncate of a memfd");
  }
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return Status::IoErrorFromErrno("sealing a memfd");
  }
  return fd;
}

}  // namespace

// First fit over kStagingUnit units. Not thread-safe.
class NativeStagingMap {
 public:
  explicit NativeStagingMap(uint64_t bytes) : used_(bytes / kStagingUnit, false) {}
  std::optional<uint64_t> Allocate(uint64_t bytes) {
    size_t units = std::max<uint64_t>(1, (bytes + kStagingUnit - 1) / kStagingUnit);
    size_t run = 0;
    for (size_t i = 0; i < used_.size(); ++i) {
      run = used_[i] ? 0 : run + 1;
      if (run == units) {
        size_t first = i + 1 - units;
        std::fill(used_.begin() + first, used_.begin() + i + 1, true);
        return first * kStagingUnit;
      }
    }
    return std::nullopt;
  }
  void Free(uint64_t offset, uint64_t bytes) {
    size_t first = offset / kStagingUnit;
    size_t units = std::max<uint64_t>(1, (bytes + kStagingUnit - 1) / kStagingUnit);
    std::fill(used_.begin() + first, used_.begin() + first + units, false);
  }

 private:
  std::vector<bool> used_;
};

namespace {

// The groups of a socket's peer (SO_PEERGROUPS), as they were when it connected.
std::vector<gid_t> PeerGroups(int sock) {
  std::vector<gid_t> groups(64);
  for (int attempt = 0; attempt < 4; ++attempt) {
    socklen_t len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (::getsockopt(sock, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
      groups.resize(len / sizeof(gid_t));
      return groups;
    }
    if (errno != ERANGE) break;
    groups.resize(len / sizeof(gid_t) + 1);
  }
  return {};
}

}  // namespace

struct NativeSession;

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
  std::atomic<uint64_t> staged{0};  // staging bytes in use, all sessions
  std::atomic<uint64_t> held{0};    // bytes readers hold, all sessions
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
    uint64_t fh = 0;
    uint64_t size = 0;
    uint64_t block_size = 0;
  };
  struct Anchor {
    BlockRef block;           // by reference: held until released
    uint64_t bytes = 0;
    uint64_t staging_at = 0;  // copied: its range of staging
    bool staged = false;
  };

  Mutex mu;
  CondVar idle;  // in_flight fell to 0
  native::RingServerState state GUARDED_BY(mu);
  uint32_t in_flight GUARDED_BY(mu) = 0;
  std::unordered_map<uint32_t, File> files GUARDED_BY(mu);
  uint32_t next_file GUARDED_BY(mu) = 1;
  std::unordered_map<uint64_t, Anchor> anchors GUARDED_BY(mu);
  uint64_t next_anchor GUARDED_BY(mu) = 1;
  uint64_t anchored_bytes GUARDED_BY(mu) = 0;
  std::unique_ptr<NativeStagingMap> staging_map GUARDED_BY(mu);
  std::map<std::pair<dev_t, ino_t>, uint32_t> arenas GUARDED_BY(mu);
  uint32_t next_arena GUARDED_BY(mu) = 1;
  Mutex send_mu;  // one message at a time on the socket

  ~NativeSession() {
    if (staging != nullptr) ::munmap(staging, staging_bytes);
  }

  Status Handshake();
  void Loop();
  void End();
  bool Drain();
  void HandleMessage(const char* data, size_t size, int* fds, size_t nfds);
  void OpenPaths(uint64_t request_id, const char* data, size_t size);
  void OpenFd(uint64_t request_id, int fd);
  void Read(const Sqe& e, File file);
  void PostLocked(uint64_t user_data, int64_t result, uint32_t arena, uint64_t offset,
                  uint64_t anchor) REQUIRES(mu);
  void FinishRead(uint64_t user_data, int64_t result, uint32_t arena, uint64_t offset,
                  uint64_t anchor);
  void ReleaseLocked(uint64_t anchor) REQUIRES(mu);
  uint32_t ArenaIdLocked(int fd) REQUIRES(mu);
  bool Send(const void* data, size_t size, const int* fds = nullptr, size_t nfds = 0) {
    MutexLock lock(&send_mu);
    return native::SendMessage(sock.get(), data, size, fds, nfds) == static_cast<ssize_t>(size);
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

Status NativeSession::Handshake() {
  pollfd p{sock.get(), POLLIN, 0};
  int ready = ::poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kHelloTimeout).count()));
  if (ready <= 0) return Status::DeadlineExceeded("no hello");
  char buf[256];
  int fds[native::kMaxMessageFds];
  size_t nfds = 0;
  ssize_t n = native::ReceiveMessage(sock.get(), buf, sizeof(buf), fds, &nfds);
  for (size_t i = 0; i < nfds; ++i) ::close(fds[i]);
  native::MessageHeader h;
  native::HelloBody hello;
  if (n < static_cast<ssize_t>(sizeof(h) + sizeof(hello))) return Status::InvalidArgument("bad hello");
  std::memcpy(&h, buf, sizeof(h));
  std::memcpy(&hello, buf + sizeof(h), sizeof(hello));
  if (h.type != native::kHello || hello.magic != native::kMagic) {
    return Status::InvalidArgument("not a lakecache native client");
  }
  if (hello.version != native::kVersion) {
    Refuse("this mount speaks version " + std::to_string(native::kVersion) +
           " of the native protocol, the client " + std::to_string(hello.version));
    return Status::InvalidArgument("version");
  }
  const NativeServerOptions& o = server->options;
  uint32_t want = hello.ring_entries == 0 ? o.sq_entries : hello.ring_entries;
  uint32_t sq = std::bit_ceil(std::clamp<uint32_t>(want, 16, 4096));
  uint32_t cq = 2 * sq;
  LC_ASSIGN_OR_RETURN(ring_fd, Memfd("lakecache-native-ring", native::RingBytes(sq, cq)));
  if (!ring.MapFd(ring_fd.get(), sq, cq)) return Status::IoErrorFromErrno("mmap of the ring");
  staging_bytes = std::max<uint64_t>(kStagingUnit, o.staging_bytes / kStagingUnit * kStagingUnit);
  LC_ASSIGN_OR_RETURN(staging_fd, Memfd("lakecache-native-staging", staging_bytes));
  void* map = ::mmap(nullptr, staging_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, staging_fd.get(), 0);
  if (map == MAP_FAILED) return Status::IoErrorFromErrno("mmap of the staging area");
  staging = static_cast<char*>(map);
  submit.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  complete.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!submit.valid() || !complete.valid()) return Status::IoErrorFromErrno("eventfd");
  {
    MutexLock lock(&mu);
    staging_map = std::make_unique<NativeStagingMap>(staging_bytes);
  }
  char out[sizeof(native::MessageHeader) + sizeof(native::WelcomeBody)];
  native::MessageHeader wh;
  wh.type = native::kWelcome;
  native::WelcomeBody w;
  w.sq_entries = sq;
  w.cq_entries = cq;
  w.max_read = kMaxRead;
  w.ring_bytes = native::RingBytes(sq, cq);
  w.staging_bytes = staging_bytes;
  w.anchor_bytes = o.anchor_bytes;
  std::memcpy(out, &wh, sizeof(wh));
  std::memcpy(out + sizeof(wh), &w, sizeof(w));
  int send_fds[4] = {ring_fd.get(), submit.get(), complete.get(), staging_fd.get()};
  if (!Send(out, sizeof(out), send_fds, 4)) return Status::IoErrorFromErrno("sending welcome");
  return Status::Ok();
}

void NativeSession::Loop() {
  std::vector<char> buf(native::kMaxMessage);
  for (;;) {
    pollfd p[3] = {{sock.get(), POLLIN, 0}, {submit.get(), POLLIN, 0}, {server->stop.get(), POLLIN, 0}};
    if (::poll(p, 3, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[2].revents != 0) return;
    if (p[1].revents != 0) {
      uint64_t count;
      (void)::read(submit.get(), &count, sizeof(count));
      if (!Drain()) {
        spdlog::warn("native data path: a reader (uid {}) broke its request ring; its session ends",
                     reader.uid);
        return;
      }
    }
    if (p[0].revents != 0) {
      int fds[native::kMaxMessageFds];
      size_t nfds = 0;
      ssize_t n = native::ReceiveMessage(sock.get(), buf.data(), buf.size(), fds, &nfds);
      if (n <= 0) {
        if (n < 0 && errno == EMSGSIZE) {
          Refuse("a message larger than " + std::to_string(native::kMaxMessage) + " bytes");
        }
        return;  // hung up, or broke the protocol
      }
      HandleMessage(buf.data(), static_cast<size_t>(n), fds, nfds);
    }
  }
}

void NativeSession::End() {
  std::unordered_map<uint32_t, File> open;
  std::unordered_map<uint64_t, Anchor> held;
  {
    MutexLock lock(&mu);
    while (in_flight > 0) idle.Wait(&mu);
    open.swap(files);
    held.swap(anchors);
    anchored_bytes = 0;
  }
  for (auto& [id, f] : open) server->fs->Release(f.fh);
  uint64_t held_bytes = 0;
  for (const auto& [id, a] : held) {
    held_bytes += a.bytes;
    server->held.fetch_sub(a.bytes);
    if (a.staged) server->staged.fetch_sub(a.bytes);
  }
  size_t held_count = held.size();
  held.clear();  // the blocks the reader held by reference go back to their tiers
  ::shutdown(sock.get(), SHUT_RDWR);
  if (ring.base != nullptr) {
    spdlog::info("native: the session of pid {} (uid {}) ended; it held {} files open and {} "
                 "ranges ({} bytes), now released",
                 pid, reader.uid, open.size(), held_count, held_bytes);
  }
}

bool NativeSession::Drain() {
  MutexLock lock(&mu);
  for (;;) {
    Sqe e;
    native::TakeResult taken = native::TakeRequest(ring, &state, in_flight, &e);
    if (taken == native::TakeResult::kBroken) return false;
    if (taken == native::TakeResult::kEmpty || taken == native::TakeResult::kFull) return true;
    switch (e.op) {
      case native::kRelease:
        ReleaseLocked(e.anchor);
        if ((e.flags & native::kFlagAck) != 0) PostLocked(e.user_data, 0, 0, 0, 0);
        break;
      case native::kRead: {
        auto it = files.find(e.file_id);
        if (it == files.end()) {
          PostLocked(e.user_data, -EBADF, 0, 0, 0);
          break;
        }
        ++in_flight;
        File f = it->second;
        server->pool->Post([self = shared_from_this(), e, f] { self->Read(e, f); });
        break;
      }
      default:
        PostLocked(e.user_data, -EINVAL, 0, 0, 0);
    }
  }
}

void NativeSession::PostLocked(uint64_t user_data, int64_t result, uint32_t arena, uint64_t offset,
                               uint64_t anchor) {
  Cqe c;
  c.user_data = user_data;
  c.result = result;
  c.arena_id = arena;
  c.arena_offset = offset;
  c.anchor = anchor;
  if (native::PostCompletion(ring, &state, c)) {
    uint64_t one = 1;
    (void)::write(complete.get(), &one, sizeof(one));
  }
}

void NativeSession::FinishRead(uint64_t user_data, int64_t result, uint32_t arena,
                               uint64_t offset, uint64_t anchor) {
  MutexLock lock(&mu);
  PostLocked(user_data, result, arena, offset, anchor);
  if (--in_flight == 0) idle.SignalAll();
}

void NativeSession::ReleaseLocked(uint64_t anchor) {
  auto it = anchors.find(anchor);
  if (it == anchors.end()) return;  // released twice, or never given: nothing to do
  anchored_bytes -= it->second.bytes;
  server->held.fetch_sub(it->second.bytes);
  if (it->second.staged) {
    staging_map->Free(it->second.staging_at, it->second.bytes);
    server->staged.fetch_sub(it->second.bytes);
    uint64_t first = std::max(it->second.staging_at, kStagingResident);
    uint64_t end = (it->second.staging_at + it->second.bytes + kStagingUnit - 1) / kStagingUnit * kStagingUnit;
    if (end > first) {
      (void)::fallocate(staging_fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                        static_cast<off_t>(first), static_cast<off_t>(end - first));
    }
  }
  anchors.erase(it);
}

uint32_t NativeSession::ArenaIdLocked(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return 0;
  auto key = std::make_pair(st.st_dev, st.st_ino);
  if (auto it = arenas.find(key); it != arenas.end()) return it->second;
  uint32_t id = next_arena++;
  char out[sizeof(native::MessageHeader) + sizeof(native::ArenaBody)];
  native::MessageHeader h;
  h.type = native::kArena;
  native::ArenaBody a;
  a.arena_id = id;
  a.bytes = static_cast<uint64_t>(st.st_size);
  std::memcpy(out, &h, sizeof(h));
  std::memcpy(out + sizeof(h), &a, sizeof(a));
  if (!Send(out, sizeof(out), &fd, 1)) return 0;
  arenas.emplace(key, id);
  return id;
}

void NativeSession::Read(const Sqe& e, File f) {
  uint64_t length = native::ReadLength(e, f.size, f.block_size, kMaxRead);
  if (length == 0) return FinishRead(e.user_data, 0, 0, 0, 0);
  thread_local std::vector<char> scratch;
  if (scratch.size() < length) scratch.resize(length);
  BlockRef pin;
  Result<std::span<const char>> got =
      server->fs->ReadPinned(f.fh, e.offset, std::span<char>(scratch.data(), length), &pin);
  if (!got.ok()) {
    server->read_errors.fetch_add(1, std::memory_order_relaxed);
    return FinishRead(e.user_data, -StatusToErrno(got.status()), 0, 0, 0);
  }
  std::span<const char> bytes = *got;
  if (pin != nullptr && pin->fd() >= 0 && bytes.data() >= pin->data() &&
      bytes.data() + bytes.size() <= pin->data() + pin->size()) {
    MutexLock lock(&mu);
    if (anchored_bytes + bytes.size() <= server->options.anchor_bytes) {
      uint32_t arena = ArenaIdLocked(pin->fd());
      if (arena != 0) {
        uint64_t id = next_anchor++;
        anchored_bytes += bytes.size();
        server->held.fetch_add(bytes.size());
        server->reads_by_reference.fetch_add(1, std::memory_order_relaxed);
        server->bytes_by_reference.fetch_add(bytes.size(), std::memory_order_relaxed);
        uint64_t at = pin->fd_offset() + static_cast<uint64_t>(bytes.data() - pin->data());
        anchors.emplace(id, Anchor{std::move(pin), bytes.size(), 0, false});
        PostLocked(e.user_data, static_cast<int64_t>(bytes.size()), arena, at, id);
        if (--in_flight == 0) idle.SignalAll();
        return;
      }
    }
  }
  std::optional<uint64_t> at;
  {
    MutexLock lock(&mu);
    if (anchored_bytes + bytes.size() <= server->options.anchor_bytes) {
      uint64_t before = server->staged.fetch_add(bytes.size());
      if (before + bytes.size() <= server->options.staging_budget) at = staging_map->Allocate(bytes.size());
      if (!at) server->staged.fetch_sub(bytes.size());
    }
  }
  if (!at) return FinishRead(e.user_data, -ENOBUFS, 0, 0, 0);
  std::memcpy(staging + *at, bytes.data(), bytes.size());
  MutexLock lock(&mu);
  uint64_t id = next_anchor++;
  anchored_bytes += bytes.size();
  server->held.fetch_add(bytes.size());
  server->reads_copied.fetch_add(1, std::memory_order_relaxed);
  server->bytes_copied.fetch_add(bytes.size(), std::memory_order_relaxed);
  anchors.emplace(id, Anchor{nullptr, bytes.size(), *at, true});
  PostLocked(e.user_data, static_cast<int64_t>(bytes.size()), native::kStagingArena, *at, id);
  if (--in_flight == 0) idle.SignalAll();
}

void NativeSession::HandleMessage(const char* data, size_t size, int* fds, size_t nfds) {
  native::MessageHeader h;
  if (size < sizeof(h)) {
    for (size_t i = 0; i < nfds; ++i) ::close(fds[i]);
    return;
  }
  std::memcpy(&h, data, sizeof(h));
  if (h.type == native::kOpenFd && nfds == 1) {
    OpenFd(h.request_id, fds[0]);
    return;
  }
  for (size_t i = 0; i < nfds; ++i) ::close(fds[i]);
  if (h.type == native::kOpenPaths) {
    OpenPaths(h.request_id, data + sizeof(h), size - sizeof(h));
  } else if (h.type == native::kClose && size >= sizeof(h) + sizeof(native::CloseBody)) {
    native::CloseBody c;
    std::memcpy(&c, data + sizeof(h), sizeof(c));
    uint64_t fh = 0;
    {
      MutexLock lock(&mu);
      auto it = files.find(c.file_id);
      if (it == files.end()) return;
      fh = it->second.fh;
      files.erase(it);
    }
    server->fs->Release(fh);
  }
}

namespace {

// The answer to an open: one entry per file, then the error texts.
std::string OpenedMessage(uint64_t request_id, const std::vector<native::OpenedFile>& entries,
                          const std::vector<std::string>& errors) {
  native::MessageHeader h;
  h.type = native::kOpened;
  h.request_id = request_id;
  native::OpenedBody b;
  b.count = static_cast<uint32_t>(entries.size());
  std::string out(reinterpret_cast<const char*>(&h), sizeof(h));
  out.append(reinterpret_cast<const char*>(&b), sizeof(b));
  out.append(reinterpret_cast<const char*>(entries.data()), entries.size() * sizeof(entries[0]));
  for (const std::string& e : errors) {
    out.append(e.substr(0, kMaxErrorText));
    out.push_back('\0');
  }
  return out;
}

}  // namespace

void NativeSession::OpenPaths(uint64_t request_id, const char* data, size_t size) {
  std::vector<std::string_view> paths;
  bool whole = native::ParseOpenPaths(data, size, kMaxOpenPerMessage, &paths);
  std::vector<native::OpenedFile> entries;
  std::vector<std::string> errors;
  for (std::string_view path : paths) {
    native::OpenedFile out;
    std::string error;
    Result<OpenedFile> opened = Status::Ok();
    Result<FileAttr> attr = server->fs->ResolveForReader(path, reader);
    if (attr.ok()) opened = server->fs->OpenNative(attr->ino);
    if (!attr.ok() || !opened.ok()) {
      const Status& s = attr.ok() ? opened.status() : attr.status();
      out.error = StatusToErrno(s);
      error = s.message();
    } else {
      Result<FileSystem::HandleShape> shape = server->fs->ShapeOf(opened->fh);
      MutexLock lock(&mu);
      if (!shape.ok() || files.size() >= server->options.max_files) {
        out.error = shape.ok() ? EMFILE : EIO;
        error = shape.ok() ? "too many files open in this session" : shape.status().message();
        server->fs->Release(opened->fh);
      } else {
        out.file_id = next_file++;
        out.size = shape->size;
        out.block_size = shape->block_size;
        files.emplace(out.file_id, File{opened->fh, shape->size, shape->block_size});
      }
    }
    entries.push_back(out);
    errors.push_back(error);
  }
  if (!whole) {
    // The reader counts one entry per path it sent: the rest are refused, the first with why.
    native::OpenPathsBody b;
    if (size >= sizeof(b)) std::memcpy(&b, data, sizeof(b));
    uint32_t count = std::min<uint32_t>(size >= sizeof(b) ? b.count : 0, kMaxOpenPerMessage);
    while (entries.size() < std::max<size_t>(count, paths.size() + 1)) {
      native::OpenedFile out;
      out.error = EINVAL;
      entries.push_back(out);
      errors.push_back(errors.size() == paths.size() ? "a malformed or too long path" : "");
    }
  }
  std::string msg = OpenedMessage(request_id, entries, errors);
  Send(msg.data(), msg.size());
}

void NativeSession::OpenFd(uint64_t request_id, int fd) {
  ScopedFd owned(fd);
  native::OpenedFile out;
  std::string error;
  struct stat st;
  int flags = ::fcntl(fd, F_GETFL);
  dev_t mount_dev;
  {
    MutexLock lock(&server->dev_mu);
    struct stat root;
    if (server->mount_dev == 0 && ::stat(server->options.mountpoint.c_str(), &root) == 0) {
      server->mount_dev = root.st_dev;
    }
    mount_dev = server->mount_dev;
  }
  if (::fstat(fd, &st) != 0 || flags < 0) {
    out.error = EBADF;
    error = "not an open file";
  } else if (!S_ISREG(st.st_mode) || st.st_dev != mount_dev) {
    out.error = EXDEV;
    error = "not a file of this mount";
  } else if ((flags & O_ACCMODE) == O_WRONLY || (flags & O_PATH) != 0) {
    out.error = EBADF;
    error = "not open for reading";
  } else {
    Result<OpenedFile> opened = server->fs->OpenNative(st.st_ino);
    Result<FileSystem::HandleShape> shape =
        opened.ok() ? server->fs->ShapeOf(opened->fh) : Result<FileSystem::HandleShape>(opened.status());
    if (!shape.ok()) {
      out.error = StatusToErrno(shape.status());
      error = shape.status().message();
    } else {
      MutexLock lock(&mu);
      out.file_id = next_file++;
      out.size = shape->size;
      out.block_size = shape->block_size;
      files.emplace(out.file_id, File{opened->fh, shape->size, shape->block_size});
    }
  }
  // The descriptor was the reader's proof; closing it here is a FLUSH the mount's FUSE threads
  // answer.
  owned.reset();
  std::string msg = OpenedMessage(request_id, {out}, {error});
  Send(msg.data(), msg.size());
}

// ---- the server ---------------------------------------------------------------------------------

void NativeServer::Impl::Accept() {
  for (;;) {
    pollfd p[2] = {{listener.get(), POLLIN, 0}, {stop.get(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents != 0) return;
    ScopedFd sock(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!sock.valid()) continue;
    MutexLock lock(&mu);
    for (std::thread& t : finished) t.join();
    finished.clear();
    if (live.load() >= options.max_sessions) {
      native::MessageHeader h;
      h.type = native::kRefused;
      std::string msg(reinterpret_cast<const char*>(&h), sizeof(h));
      msg += "this mount serves " + std::to_string(options.max_sessions) + " native sessions already";
      native::SendMessage(sock.get(), msg.data(), msg.size(), nullptr, 0);
      continue;
    }
    uint64_t id = next_session++;
    ++live;
    ++sessions_total;
    threads.emplace(id, std::thread([this, id, s = std::move(sock)]() mutable {
      Serve(id, std::move(s));
    }));
  }
}

void NativeServer::Impl::Serve(uint64_t id, ScopedFd sock) {
  auto session = std::make_shared<NativeSession>();
  session->server = this;
  session->sock = std::move(sock);
  std::vector<uid_t> allowed = options.allow_uids;
  allowed.push_back(::geteuid());
  allowed.push_back(0);
  Result<uid_t> uid = rpc::AllowedPeerUid(session->sock.get(), allowed,
                                          "read this mount's native data path",
                                          "lakecache mount --allow-uid");
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (!uid.ok()) {
    session->Refuse(uid.status().message());
  } else if (::getsockopt(session->sock.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
    session->reader.uid = cred.uid;
    session->pid = cred.pid;
    session->reader.gid = cred.gid;
    session->reader.groups = PeerGroups(session->sock.get());
    Status s = session->Handshake();
    if (s.ok()) {
      session->Loop();
    } else {
      spdlog::debug("native data path: a session did not start: {}", s.message());
    }
    session->End();
  }
  --live;
  MutexLock lock(&mu);
  auto it = threads.find(id);
  if (it != threads.end()) {
    finished.push_back(std::move(it->second));
    threads.erase(it);
  }
}

Result<std::unique_ptr<NativeServer>> NativeServer::Start(std::shared_ptr<FileSystem> fs,
                                                          const NativeServerOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->fs = std::move(fs);
  impl->options = options;
  LC_ASSIGN_OR_RETURN(sockaddr_un addr, rpc::UnixSocketAddress("native socket", options.socket_path));
  impl->listener.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!impl->listener.valid()) return Status::IoErrorFromErrno("socket");
  ::unlink(options.socket_path.c_str());
  if (::bind(impl->listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Status::IoErrorFromErrno("bind " + options.socket_path);
  }
  // Who may attach is decided by the uid check, not by the file's mode.
  ::chmod(options.socket_path.c_str(), 0666);
  if (::listen(impl->listener.get(), 64) != 0) return Status::IoErrorFromErrno("listen");
  impl->stop.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl->stop.valid()) return Status::IoErrorFromErrno("eventfd");
  impl->pool = std::make_unique<ThreadPool>(std::max<size_t>(1, options.threads));
  Impl* raw = impl.get();
  impl->acceptor = std::thread([raw] { raw->Accept(); });
  return std::unique_ptr<NativeServer>(new NativeServer(std::move(impl)));
}

NativeServer::NativeServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

NativeServer::~NativeServer() {
  uint64_t one = 1;
  (void)::write(impl_->stop.get(), &one, sizeof(one));
  impl_->acceptor.join();
  std::map<uint64_t, std::thread> threads;
  std::vector<std::thread> finished;
  {
    MutexLock lock(&impl_->mu);
    threads.swap(impl_->threads);
    finished.swap(impl_->finished);
  }
  for (auto& [id, t] : threads) t.join();
  for (std::thread& t : finished) t.join();
  {
    MutexLock lock(&impl_->mu);
    for (std::thread& t : impl_->finished) t.join();
    impl_->finished.clear();
  }
  impl_->pool.reset();
  ::unlink(impl_->options.socket_path.c_str());
}

const std::string& NativeServer::socket_path() const { return impl_->options.socket_path; }
NativeServer::Stats NativeServer::stats() const {
  Stats s;
  s.sessions = impl_->live.load();
  s.sessions_total = impl_->sessions_total.load();
  s.held_bytes = impl_->held.load();
  s.staged_bytes = impl_->staged.load();
  s.reads_by_reference = impl_->reads_by_reference.load();
  s.bytes_by_reference = impl_->bytes_by_reference.load();
  s.reads_copied = impl_->reads_copied.load();
  s.bytes_copied = impl_->bytes_copied.load();
  s.read_errors = impl_->read_errors.load();
  return s;
}

}  // namespace lakecache
