#include "native/native_session.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
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

constexpr auto kHelloTimeout = std::chrono::seconds(5);

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

// A read-only descriptor of the memfd `fd` (a reopen through /proc: the reader can neither write
// nor punch holes in the memory it maps).
ScopedFd ReadOnly(int fd) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  return ScopedFd(::open(path, O_RDONLY | O_CLOEXEC));
}

}  // namespace

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
  if (n < static_cast<ssize_t>(sizeof(h) + sizeof(hello)))
    return Status::InvalidArgument("bad hello");
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
  staging_bytes = std::max<uint64_t>(kNativeStagingUnit,
                                     o.staging_bytes / kNativeStagingUnit * kNativeStagingUnit);
  LC_ASSIGN_OR_RETURN(staging_fd, Memfd("lakecache-native-staging", staging_bytes));
  void* map =
      ::mmap(nullptr, staging_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, staging_fd.get(), 0);
  if (map == MAP_FAILED) return Status::IoErrorFromErrno("mmap of the staging area");
  staging = static_cast<char*>(map);
  // A reader that does not read what it is sent ends its session (Send) rather than block it.
  timeval send_timeout{2, 0};
  ::setsockopt(sock.get(), SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
  // A mapped arena shows every block in it: by reference only to a reader that may read every
  // file of the mount anyway (root, the mount's owner, or files readable by all).
  by_reference = server->fs->ReadableByAll(reader);
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
  w.max_read = kNativeMaxRead;
  w.ring_bytes = native::RingBytes(sq, cq);
  w.staging_bytes = staging_bytes;
  w.anchor_bytes = o.anchor_bytes;
  std::memcpy(out, &wh, sizeof(wh));
  std::memcpy(out + sizeof(wh), &w, sizeof(w));
  ScopedFd staging_ro = ReadOnly(staging_fd.get());
  if (!staging_ro.valid()) return Status::IoErrorFromErrno("reopening the staging area");
  int send_fds[4] = {ring_fd.get(), submit.get(), complete.get(), staging_ro.get()};
  if (!Send(out, sizeof(out), send_fds, 4)) return Status::IoErrorFromErrno("sending welcome");
  return Status::Ok();
}

void NativeSession::Loop() {
  std::vector<char> buf(native::kMaxMessage);
  for (;;) {
    pollfd p[3] = {
        {sock.get(), POLLIN, 0}, {submit.get(), POLLIN, 0}, {server->stop.get(), POLLIN, 0}};
    if (::poll(p, 3, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[2].revents != 0) return;
    if (p[1].revents != 0) {
      uint64_t count;
      (void)::read(submit.get(), &count, sizeof(count));
      if (!Serve()) {
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
  // First: a read blocked sending to the reader gives up.
  ::shutdown(sock.get(), SHUT_RDWR);
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
  if (ring.base != nullptr) {
    spdlog::info(
        "native: the session of pid {} (uid {}) ended; it held {} files open and {} "
        "ranges ({} bytes), now released",
        pid, reader.uid, open.size(), held_count, held_bytes);
  }
}

// Drains the ring, then keeps looking at it for a while (kAwake) before the session thread sleeps:
// a reader that submits again within it costs no wake-up on either side.
bool NativeSession::Serve() {
  constexpr auto kAwake = std::chrono::microseconds(50);
  native::RingHeader* h = ring.header();
  h->server_awake.store(1, std::memory_order_seq_cst);
  for (;;) {
    if (!Drain()) return false;
    // At most one session per spare core looks on; the others sleep at once. Looking yields the
    // core to whoever else wants it (a reader, a fetch).
    auto queued = [this] {
      MutexLock lock(&mu);
      return native::RequestsQueued(ring, state);
    };
    bool more = false;
    if (!full) {
      if (server->lookers.fetch_add(1) < server->max_lookers) {
        auto until = std::chrono::steady_clock::now() + kAwake;
        while (!more && std::chrono::steady_clock::now() < until) {
          more = queued();
          if (!more) ::sched_yield();
        }
      }
      server->lookers.fetch_sub(1);
    }
    if (more) continue;
    h->server_awake.store(0, std::memory_order_seq_cst);
    if (full || !queued()) return true;  // the reader writes the eventfd
    h->server_awake.store(1, std::memory_order_seq_cst);
  }
}

bool NativeSession::Drain() {
  constexpr size_t kBatch = 64;
  full = false;
  for (;;) {
    std::vector<std::pair<Sqe, File>> reads;
    reads.reserve(kBatch);
    native::TakeResult taken = native::TakeResult::kTaken;
    {
      MutexLock lock(&mu);
      while (reads.size() < kBatch) {
        Sqe e;
        taken = native::TakeRequest(ring, &state, in_flight, &e);
        if (taken != native::TakeResult::kTaken) break;
        if (e.op == native::kRelease) {
          ReleaseLocked(e.anchor);
          if ((e.flags & native::kFlagAck) != 0) PostLocked(e.user_data, 0, 0, 0, 0);
          continue;
        }
        auto it = e.op == native::kRead ? files.find(e.file_id) : files.end();
        if (it == files.end()) {
          PostLocked(e.user_data, e.op == native::kRead ? -EBADF : -EINVAL, 0, 0, 0);
          continue;
        }
        ++in_flight;
        ++file_reads[e.file_id];
        reads.emplace_back(e, it->second);
      }
    }
    // Reads of memory are served here, at once; the others (a fetch, a disk read) on the pool,
    // so that none waits behind them.
    for (const auto& [e, f] : reads) {
      if (server->fs->InMemoryAt(f.fh, e.offset)) {
        Read(e, f);
      } else {
        server->pool->Post([self = shared_from_this(), e = e, f = f] { self->Read(e, f); });
      }
    }
    if (taken == native::TakeResult::kBroken) return false;
    if (taken == native::TakeResult::kFull) {
      full = true;  // the reader writes the submit eventfd once it has consumed completions
      return true;
    }
    if (taken != native::TakeResult::kTaken) return true;
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

void NativeSession::FinishRead(const Sqe& e, const File& file, int64_t result, uint32_t arena,
                               uint64_t offset, std::optional<Anchor> anchor) {
  uint64_t release = 0;
  {
    MutexLock lock(&mu);
    uint64_t id = 0;
    if (anchor) {
      id = next_anchor++;
      anchors.emplace(id, std::move(*anchor));
    }
    PostLocked(e.user_data, result, arena, offset, id);
    if (--file_reads[file.id] == 0) {
      file_reads.erase(file.id);
      if (auto it = closing.find(file.id); it != closing.end()) {
        release = it->second;
        closing.erase(it);
      }
    }
    if (--in_flight == 0) idle.SignalAll();
  }
  if (release != 0) server->fs->Release(release);
}

void NativeSession::ReleaseLocked(uint64_t anchor) {
  auto it = anchors.find(anchor);
  if (it == anchors.end()) return;  // released twice, or never given: nothing to do
  anchored_bytes -= it->second.bytes;
  server->held.fetch_sub(it->second.bytes);
  if (it->second.staged) {
    staging_map->Free(it->second.staging_at, it->second.bytes);
    server->staged.fetch_sub(it->second.bytes);
    uint64_t first = std::max(it->second.staging_at, kNativeStagingResident);
    uint64_t end = (it->second.staging_at + it->second.bytes + kNativeStagingUnit - 1) /
                   kNativeStagingUnit * kNativeStagingUnit;
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
  ScopedFd read_only = ReadOnly(fd);
  int send = read_only.get();
  if (send < 0 || !Send(out, sizeof(out), &send, 1)) return 0;
  arenas.emplace(key, id);
  return id;
}

BlockRef NativeSession::HoldForReader(uint64_t fh, uint64_t offset, BlockRef pin) {
  std::optional<BlockKey> key = server->fs->BlockKeyAt(fh, offset);
  if (!key) return nullptr;
  int keep = -1;
  BlockRef held;
  {
    MutexLock lock(&holds_mu);
    if (!holds_made) {
      holds = server->fs->NewReaderHolds();
      holds_made = true;
    }
    if (holds == nullptr) return pin;
    held = holds->Hold(*key, pin, &keep);
  }
  if (keep >= 0) {
    ScopedFd sent(keep);
    native::MessageHeader h;
    h.type = native::kHold;
    if (!Send(&h, sizeof(h), &keep, 1)) return nullptr;
  }
  return held;
}

void NativeSession::Read(const Sqe& e, File f) {
  uint64_t length = native::ReadLength(e, f.size, f.block_size, kNativeMaxRead);
  if (length == 0) return FinishRead(e, f, 0);
  thread_local std::vector<char> scratch;
  if (scratch.size() < length) scratch.resize(length);
  BlockRef pin;
  Result<std::span<const char>> got =
      server->fs->ReadPinned(f.fh, e.offset, std::span<char>(scratch.data(), length), &pin);
  if (!got.ok()) {
    server->read_errors.fetch_add(1, std::memory_order_relaxed);
    return FinishRead(e, f, -StatusToErrno(got.status()));
  }
  std::span<const char> bytes = *got;
  const uint64_t n = bytes.size();
  bool in_pin = pin != nullptr && pin->fd() >= 0 && bytes.data() >= pin->data() &&
                bytes.data() + n <= pin->data() + pin->size();
  if (in_pin && by_reference) {
    // What the reader gets by reference is held for it in a way that outlives this process.
    BlockRef held = HoldForReader(f.fh, e.offset, pin);
    if (held != nullptr && held != pin) {
      bytes = std::span<const char>(held->data() + (bytes.data() - pin->data()), n);
      pin = std::move(held);
    } else if (held == nullptr) {
      in_pin = false;
    }
  }
  // The session's budget is checked and charged under one lock.
  std::optional<uint64_t> at;
  uint32_t arena = 0;
  {
    MutexLock lock(&mu);
    if (anchored_bytes + n > server->options.anchor_bytes) {
      // fall through: ENOBUFS
    } else if (in_pin && by_reference && (arena = ArenaIdLocked(pin->fd())) != 0) {
      anchored_bytes += n;
    } else if (server->staged.fetch_add(n) + n <= server->options.staging_budget &&
               (at = staging_map->Allocate(n))) {
      anchored_bytes += n;
    } else {
      server->staged.fetch_sub(n);
    }
  }
  if (arena != 0) {
    server->held.fetch_add(n);
    server->reads_by_reference.fetch_add(1, std::memory_order_relaxed);
    server->bytes_by_reference.fetch_add(n, std::memory_order_relaxed);
    uint64_t offset = pin->fd_offset() + static_cast<uint64_t>(bytes.data() - pin->data());
    return FinishRead(e, f, static_cast<int64_t>(n), arena, offset,
                      Anchor{std::move(pin), n, 0, false});
  }
  if (!at) return FinishRead(e, f, -ENOBUFS);
  std::memcpy(staging + *at, bytes.data(), n);
  server->held.fetch_add(n);
  server->reads_copied.fetch_add(1, std::memory_order_relaxed);
  server->bytes_copied.fetch_add(n, std::memory_order_relaxed);
  FinishRead(e, f, static_cast<int64_t>(n), native::kStagingArena, *at,
             Anchor{nullptr, n, *at, true});
}

}  // namespace lakecache
