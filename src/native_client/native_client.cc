// The client library of the native data path (lakecache_native.h): libc and the wire headers of
// native/ only, so that any process can load it.
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
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

namespace {

using lakecache::native::Cqe;
using lakecache::native::Sqe;
namespace wire = lakecache::native;

thread_local std::string t_error;

// Records the failure: -1 with errno = `err` and the message.
int Fail(int err, std::string message) {
  t_error = std::move(message);
  errno = err;
  return -1;
}

constexpr auto kAttachPatience = std::chrono::seconds(60);  // a restarting server
constexpr auto kAnswerTimeout = std::chrono::seconds(120);

struct Mapping {
  const char* data = nullptr;
  size_t bytes = 0;
};

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
};

}  // namespace

struct lc_file {
  lc_client* client = nullptr;
  std::string path;  // inside the mount; empty when opened by descriptor
  int fd = -1;       // a duplicate of the caller's descriptor, to open it again after a restart
  uint32_t id = 0;
  uint64_t session = 0;  // the session `id` belongs to
  uint64_t size = 0;
  uint64_t block_size = 0;
};

struct lc_client {
  std::recursive_mutex mu;
  pid_t pid = 0;
  std::string mountpoint;
  std::string socket_path;
  int sock = -1, submit = -1, complete = -1;
  wire::RingMapping ring;
  wire::RingClientState rs;
  Mapping staging;
  std::unordered_map<uint32_t, Mapping> arenas;
  std::vector<Mapping> retired;  // of ended sessions: views handed out stay readable
  uint32_t max_read = 0;
  uint64_t anchor_bytes = 0;
  uint64_t session = 0;  // counts attachments
  uint64_t next_request = 1;
  std::set<lc_file*> files;
  std::vector<std::string> read_errors;  // of the last lc_read_many

  ~lc_client() { Drop(false); }

  // Forgets the session; with `unmap`, its mappings too (else they are kept for views).
  void Drop(bool keep_views_only) {
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
    if (!keep_views_only) {
      for (Mapping& m : retired) ::munmap(const_cast<char*>(m.data), m.bytes);
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
  int Run(std::vector<lc_file*>& files, std::vector<Piece>& pieces);
  void Release(uint64_t anchor);
  void Kick() {
    uint64_t one = 1;
    (void)!::write(submit, &one, sizeof(one));
  }
  std::string Relative(const char* path) const;
};

namespace {

// A read of the mount's control file `.lakecache/native` in `dir`: the socket's path, or empty.
std::string SocketNamedIn(const std::string& dir) {
  std::string file = dir + "/.lakecache/native";
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[PATH_MAX + 2];
  ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return "";
  std::string s(buf, static_cast<size_t>(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

}  // namespace

std::string lc_client::Relative(const char* path) const {
  std::string p = path;
  // A mount shows no symbolic links: a path under the mountpoint without "." or ".." parts needs
  // no realpath (which would ask the mount about every folder on the way).
  bool plain = p.find("/./") == std::string::npos && p.find("/../") == std::string::npos &&
               p.find("//") == std::string::npos;
  if (plain && p.size() > mountpoint.size() && p.compare(0, mountpoint.size(), mountpoint) == 0 &&
      p[mountpoint.size()] == '/') {
    return p.substr(mountpoint.size() + 1);
  }
  if (!p.empty() && p[0] == '/') {
    char* real = ::realpath(path, nullptr);
    if (real != nullptr) {
      p = real;
      std::free(real);
    }
    if (p.compare(0, mountpoint.size(), mountpoint) == 0 &&
        (p.size() == mountpoint.size() || p[mountpoint.size()] == '/' || mountpoint == "/")) {
      p = p.substr(mountpoint.size());
    } else {
      return std::string("\0", 1);  // outside the mount
    }
  }
  size_t start = p.find_first_not_of('/');
  return start == std::string::npos ? "" : p.substr(start);
}

int lc_client::Connect() {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) return Fail(ENAMETOOLONG, "socket path too long");
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  int s = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (s < 0) return Fail(errno, std::string("socket: ") + std::strerror(errno));
  if (::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int e = errno;
    ::close(s);
    return Fail(e, "cannot reach the mount's native socket " + socket_path + ": " + std::strerror(e));
  }
  char hello[sizeof(wire::MessageHeader) + sizeof(wire::HelloBody)];
  wire::MessageHeader h;
  h.type = wire::kHello;
  wire::HelloBody b;
  std::memcpy(hello, &h, sizeof(h));
  std::memcpy(hello + sizeof(h), &b, sizeof(b));
  if (wire::SendMessage(s, hello, sizeof(hello), nullptr, 0) < 0) {
    int e = errno;
    ::close(s);
    return Fail(e, std::string("hello: ") + std::strerror(e));
  }
  pollfd p{s, POLLIN, 0};
  char buf[1024];
  int fds[wire::kMaxMessageFds];
  size_t nfds = 0;
  ssize_t n = ::poll(&p, 1, 10000) == 1 ? wire::ReceiveMessage(s, buf, sizeof(buf) - 1, fds, &nfds) : -1;
  if (n < static_cast<ssize_t>(sizeof(wire::MessageHeader))) {
    ::close(s);
    for (size_t i = 0; i < nfds; ++i) ::close(fds[i]);
    return Fail(ECONNRESET, "the mount's server did not answer the native hello");
  }
  std::memcpy(&h, buf, sizeof(h));
  if (h.type == wire::kRefused) {
    ::close(s);
    for (size_t i = 0; i < nfds; ++i) ::close(fds[i]);
    buf[n] = '\0';
    return Fail(EACCES, "the mount refused: " + std::string(buf + sizeof(h)));
  }
  wire::WelcomeBody w;
  if (h.type != wire::kWelcome || n < static_cast<ssize_t>(sizeof(h) + sizeof(w)) || nfds != 4) {
    ::close(s);
    for (size_t i = 0; i < nfds; ++i) ::close(fds[i]);
    return Fail(EPROTO, "unexpected answer to the native hello");
  }
  std::memcpy(&w, buf + sizeof(h), sizeof(w));
  Drop(true);
  sock = s;
  submit = fds[1];
  complete = fds[2];
  bool ok = ring.MapFd(fds[0], w.sq_entries, w.cq_entries);
  void* st = ::mmap(nullptr, w.staging_bytes, PROT_READ, MAP_SHARED, fds[3], 0);
  int e = errno;
  ::close(fds[0]);
  ::close(fds[3]);
  if (!ok || st == MAP_FAILED) {
    if (st != MAP_FAILED) ::munmap(st, w.staging_bytes);
    Drop(true);
    return Fail(e, std::string("mapping the native ring: ") + std::strerror(e));
  }
  staging = {static_cast<const char*>(st), w.staging_bytes};
  max_read = w.max_read;
  anchor_bytes = w.anchor_bytes;
  ++session;
  pid = ::getpid();
  return 0;
}

// Connects, waiting out a server that restarts (its socket comes back), then opens the files.
int lc_client::Attach() {
  auto deadline = std::chrono::steady_clock::now() + kAttachPatience;
  for (int attempt = 0;; ++attempt) {
    if (Connect() == 0) break;
    if (errno == EACCES || errno == EPROTO || std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50 * (attempt + 1), 500)));
  }
  for (lc_file* f : files) {
    if (Reopen(f) != 0) f->session = 0;  // its reads fail with the reason
  }
  return 0;
}

int lc_client::EnsureAttached() {
  if (pid != ::getpid()) {
    // A child after fork(): the session is the parent's; never touch its ring.
    for (int* fd : {&sock, &submit, &complete}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
    ring.base = nullptr;  // the parent's mapping, left as it is
    rs = {};
    return Attach();
  }
  if (sock < 0) return Attach();
  return 0;
}

int lc_client::HandleMessage(const char* data, size_t size, int* fds, size_t nfds,
                             uint64_t want_request, std::vector<char>* answer) {
  wire::MessageHeader h;
  if (size < sizeof(h)) return 0;
  std::memcpy(&h, data, sizeof(h));
  if (h.type == wire::kArena && size >= sizeof(h) + sizeof(wire::ArenaBody) && nfds == 1) {
    wire::ArenaBody a;
    std::memcpy(&a, data + sizeof(h), sizeof(a));
    void* m = ::mmap(nullptr, a.bytes, PROT_READ, MAP_SHARED, fds[0], 0);
    ::close(fds[0]);
    if (m == MAP_FAILED) return Fail(errno, std::string("mapping node memory: ") + std::strerror(errno));
    arenas[a.arena_id] = {static_cast<const char*>(m), a.bytes};
    return 0;
  }
  for (size_t i = 0; i < nfds; ++i) ::close(fds[i]);
  if (h.type == wire::kOpened && h.request_id == want_request && answer != nullptr) {
    answer->assign(data, data + size);
    return 1;
  }
  if (h.type == wire::kRefused) {
    return Fail(EPROTO, "the mount ended the session: " + std::string(data + sizeof(h), size - sizeof(h)));
  }
  return 0;
}

// Reads what the socket holds (waiting for one message when `block`): 1 when the answer to
// `want_request` came, 0 otherwise, -1 when the session ended.
int lc_client::PumpSocket(bool block, uint64_t want_request, std::vector<char>* answer) {
  std::vector<char> buf(wire::kMaxMessage);
  for (;;) {
    pollfd p{sock, POLLIN, 0};
    int ready = ::poll(&p, 1, block ? static_cast<int>(std::chrono::milliseconds(kAnswerTimeout).count()) : 0);
    if (ready == 0) return block ? Fail(ETIMEDOUT, "the mount's server did not answer") : 0;
    if (ready < 0) {
      if (errno == EINTR) continue;
      return Fail(errno, std::strerror(errno));
    }
    int fds[wire::kMaxMessageFds];
    size_t nfds = 0;
    ssize_t n = wire::ReceiveMessage(sock, buf.data(), buf.size(), fds, &nfds);
    if (n <= 0) return Fail(ECONNRESET, "the mount's server went away");
    int r = HandleMessage(buf.data(), static_cast<size_t>(n), fds, nfds, want_request, answer);
    if (r != 0) return r;
    block = false;  // one message was what we waited for; take the rest without waiting
  }
}

int lc_client::Exchange(const std::string& request, std::vector<char>* answer) {
  wire::MessageHeader h;
  std::memcpy(&h, request.data(), sizeof(h));
  if (wire::SendMessage(sock, request.data(), request.size(), nullptr, 0) < 0) {
    return Fail(ECONNRESET, "the mount's server went away");
  }
  for (;;) {
    int r = PumpSocket(true, h.request_id, answer);
    if (r != 0) return r == 1 ? 0 : -1;
  }
}

int lc_client::OpenPaths(const std::vector<std::string>& paths, std::vector<lc_file*>* out,
                         std::vector<std::string>* errors) {
  out->assign(paths.size(), nullptr);
  errors->assign(paths.size(), "");
  size_t at = 0;
  while (at < paths.size()) {
    std::string msg(sizeof(wire::MessageHeader) + sizeof(wire::OpenPathsBody), '\0');
    size_t first = at;
    while (at < paths.size() && at - first < 1024 &&
           msg.size() + paths[at].size() + 1 <= wire::kMaxMessage) {
      msg += paths[at++];
      msg.push_back('\0');
    }
    if (at == first) {
      (*errors)[at++] = "path too long";
      continue;
    }
    wire::MessageHeader h;
    h.type = wire::kOpenPaths;
    h.request_id = next_request++;
    wire::OpenPathsBody b;
    b.count = static_cast<uint32_t>(at - first);
    std::memcpy(msg.data(), &h, sizeof(h));
    std::memcpy(msg.data() + sizeof(h), &b, sizeof(b));
    std::vector<char> answer;
    if (Exchange(msg, &answer) != 0) return -1;
    wire::OpenedBody ob;
    size_t head = sizeof(h) + sizeof(ob);
    std::memcpy(&ob, answer.data() + sizeof(h), sizeof(ob));
    if (ob.count != b.count || answer.size() < head + ob.count * sizeof(wire::OpenedFile)) {
      return Fail(EPROTO, "a malformed answer to an open");
    }
    const char* text = answer.data() + head + ob.count * sizeof(wire::OpenedFile);
    const char* end = answer.data() + answer.size();
    for (uint32_t i = 0; i < ob.count; ++i) {
      wire::OpenedFile e;
      std::memcpy(&e, answer.data() + head + i * sizeof(e), sizeof(e));
      const char* nul = static_cast<const char*>(std::memchr(text, '\0', static_cast<size_t>(end - text)));
      std::string message = nul != nullptr ? std::string(text, nul) : "";
      text = nul != nullptr ? nul + 1 : end;
      if (e.error != 0) {
        (*errors)[first + i] = paths[first + i] + ": " + message;
        (*out)[first + i] = reinterpret_cast<lc_file*>(static_cast<intptr_t>(-e.error));
        continue;
      }
      auto* f = new lc_file;
      f->client = this;
      f->path = paths[first + i];
      f->id = e.file_id;
      f->session = session;
      f->size = e.size;
      f->block_size = e.block_size;
      (*out)[first + i] = f;
    }
  }
  return 0;
}

int lc_client::Reopen(lc_file* f) {
  std::vector<char> answer;
  if (f->fd >= 0) {
    wire::MessageHeader h;
    h.type = wire::kOpenFd;
    h.request_id = next_request++;
    char msg[sizeof(h) + sizeof(wire::OpenFdBody)] = {};
    std::memcpy(msg, &h, sizeof(h));
    if (wire::SendMessage(sock, msg, sizeof(msg), &f->fd, 1) < 0) {
      return Fail(ECONNRESET, "the mount's server went away");
    }
    for (;;) {
      int r = PumpSocket(true, h.request_id, &answer);
      if (r < 0) return -1;
      if (r == 1) break;
    }
    wire::OpenedFile e;
    size_t at = sizeof(h) + sizeof(wire::OpenedBody);
    if (answer.size() < at + sizeof(e)) return Fail(EPROTO, "a malformed answer to an open");
    std::memcpy(&e, answer.data() + at, sizeof(e));
    if (e.error != 0) {
      return Fail(e.error, std::string(answer.data() + at + sizeof(e), answer.size() - at - sizeof(e)).c_str());
    }
    if (f->session != 0 && e.size != f->size) return Fail(ESTALE, "the file changed while the mount restarted");
    f->id = e.file_id;
    f->size = e.size;
    f->block_size = e.block_size;
    f->session = session;
    return 0;
  }
  std::vector<lc_file*> opened;
  std::vector<std::string> errors;
  if (OpenPaths({f->path}, &opened, &errors) != 0) return -1;
  intptr_t v = reinterpret_cast<intptr_t>(opened[0]);
  if (v < 0 && v > -4096) return Fail(static_cast<int>(-v), errors[0]);
  std::unique_ptr<lc_file> fresh(opened[0]);
  if (f->session != 0 && fresh->size != f->size) {
    wire::MessageHeader h;
    h.type = wire::kClose;
    wire::CloseBody c;
    c.file_id = fresh->id;
    char msg[sizeof(h) + sizeof(c)];
    std::memcpy(msg, &h, sizeof(h));
    std::memcpy(msg + sizeof(h), &c, sizeof(c));
    wire::SendMessage(sock, msg, sizeof(msg), nullptr, 0);
    return Fail(ESTALE, f->path + ": the object changed while the mount's server restarted");
  }
  f->id = fresh->id;
  f->size = fresh->size;
  f->block_size = fresh->block_size;
  f->session = session;
  return 0;
}

void lc_client::Release(uint64_t anchor) {
  if (anchor == 0 || sock < 0) return;
  Sqe e;
  e.op = wire::kRelease;
  e.anchor = anchor;
  while (!wire::SubmitRequest(ring, &rs, e)) {
    Kick();
    std::this_thread::yield();
  }
}

// Runs `pieces` of reads of `files` (pieces[i].read indexes files) to completion: each piece ends
// done with its result (bytes or -errno). When the session ends under it (the server restarted
// or was taken over) it attaches again and runs what was not done. -1 only when the client cannot
// attach at all.
int lc_client::Run(std::vector<lc_file*>& pfiles, std::vector<Piece>& pieces) {
  enum { kPending = 0, kInFlight = 1 };
  std::vector<uint8_t> state(pieces.size(), kPending);
  for (int restarts = 0;; ++restarts) {
    if (EnsureAttached() != 0) return -1;
    size_t cursor = 0, in_flight = 0;
    bool broken = false;
    auto submit_more = [&] {
      bool any = false;
      for (; cursor < pieces.size(); ++cursor) {
        Piece& p = pieces[cursor];
        if (p.done || state[cursor] != kPending) continue;
        lc_file* f = pfiles[p.read];
        if (f == nullptr || f->session != session) {
          p.done = true;
          p.result = -ESTALE;
          continue;
        }
        if (in_flight + 1 >= ring.cq_entries / 2) break;
        Sqe e;
        e.op = wire::kRead;
        e.user_data = cursor + 1;
        e.file_id = f->id;
        e.offset = p.offset;
        e.length = p.length;
        if (!wire::SubmitRequest(ring, &rs, e)) break;
        state[cursor] = kInFlight;
        ++in_flight;
        any = true;
      }
      if (any) Kick();
    };
    submit_more();
    while (!broken) {
      if (in_flight == 0) {
        if (cursor >= pieces.size()) return 0;
        submit_more();
        if (in_flight == 0) {  // the ring is full of releases the server has not taken yet
          Kick();
          std::this_thread::yield();
        }
        continue;
      }
      Cqe c;
      if (!wire::TakeCompletion(ring, &rs, &c)) {
        ring.header()->reader_waiting.store(1, std::memory_order_seq_cst);
        if (!wire::TakeCompletion(ring, &rs, &c)) {
          pollfd p[2] = {{complete, POLLIN, 0}, {sock, POLLIN, 0}};
          int ready = ::poll(p, 2, 1000);
          ring.header()->reader_waiting.store(0, std::memory_order_relaxed);
          if (ready > 0 && p[0].revents != 0) {
            uint64_t count;
            (void)!::read(complete, &count, sizeof(count));
          }
          if (ready > 0 && p[1].revents != 0 && PumpSocket(false, 0, nullptr) < 0) broken = true;
          if (wire::RequestsWaiting(ring, rs)) Kick();
          continue;
        }
        ring.header()->reader_waiting.store(0, std::memory_order_relaxed);
      }
      if (c.user_data == 0 || c.user_data > pieces.size() || state[c.user_data - 1] != kInFlight) {
        continue;  // not a read of this call
      }
      size_t index = c.user_data - 1;
      Piece& p = pieces[index];
      --in_flight;
      state[index] = kPending;
      if (c.result == -ENOBUFS && in_flight > 0) {
        // The session's staging area or anchors are full: run it again once others are done.
        cursor = std::min(cursor, index);
        continue;
      }
      p.done = true;
      p.result = c.result;
      if (c.result >= 0) {
        Mapping m;
        if (c.arena_id == wire::kStagingArena) {
          m = staging;
        } else {
          auto it = arenas.find(c.arena_id);
          if (it == arenas.end() && PumpSocket(false, 0, nullptr) >= 0) it = arenas.find(c.arena_id);
          if (it != arenas.end()) m = it->second;
        }
        uint64_t n = static_cast<uint64_t>(c.result);
        if (m.data == nullptr || c.arena_offset > m.bytes || n > m.bytes - c.arena_offset ||
            n > p.length) {
          Release(c.anchor);
          p.result = -EPROTO;
        } else if (p.dst != nullptr) {
          std::memcpy(p.dst, m.data + c.arena_offset, n);
          Release(c.anchor);
        } else {
          p.view = m.data + c.arena_offset;
          p.anchor = c.anchor;
        }
      }
      submit_more();
    }
    // The session ended under us: attach again (the files open again) and run what is not done.
    // Views of the old session stay mapped.
    if (restarts >= 3) return Fail(ECONNRESET, "the mount's server keeps going away");
    Drop(true);
    std::fill(state.begin(), state.end(), kPending);
  }
}

// ---- fork -----------------------------------------------------------------------------------------
// A child of fork() has one thread: a client's lock another thread of the parent held at the fork
// would never be released there. Every client's lock is made anew in the child (which attaches
// anew on its first call: see EnsureAttached).
namespace {
std::mutex g_clients_mu;
std::set<lc_client*>* g_clients = new std::set<lc_client*>;  // never destroyed: atfork may run late

void LockRegistry() { g_clients_mu.lock(); }
void UnlockRegistry() { g_clients_mu.unlock(); }
void ChildAfterFork() {
  new (&g_clients_mu) std::mutex();
  for (lc_client* c : *g_clients) new (&c->mu) std::recursive_mutex();
}
void Register(lc_client* c) {
  static std::once_flag once;
  std::call_once(once, [] { ::pthread_atfork(LockRegistry, UnlockRegistry, ChildAfterFork); });
  std::lock_guard<std::mutex> lock(g_clients_mu);
  g_clients->insert(c);
}
void Unregister(lc_client* c) {
  std::lock_guard<std::mutex> lock(g_clients_mu);
  g_clients->erase(c);
}
}  // namespace

// ---- the C ABI ------------------------------------------------------------------------------------

extern "C" {

lc_client* lc_attach(const char* path) {
  if (path == nullptr) {
    Fail(EINVAL, "no path");
    return nullptr;
  }
  char* real = ::realpath(path, nullptr);
  if (real == nullptr) {
    Fail(errno, std::string(path) + ": " + std::strerror(errno));
    return nullptr;
  }
  std::string at = real;
  std::free(real);
  struct stat st;
  if (::stat(at.c_str(), &st) != 0) {
    Fail(errno, at + ": " + std::strerror(errno));
    return nullptr;
  }
  if (!S_ISDIR(st.st_mode)) at = at.substr(0, std::max<size_t>(1, at.rfind('/')));
  // The mount's root: the highest folder on the path on the same device.
  std::string root = at;
  while (root != "/") {
    std::string parent = root.substr(0, std::max<size_t>(1, root.rfind('/')));
    struct stat ps;
    if (::stat(parent.c_str(), &ps) != 0 || ps.st_dev != st.st_dev) break;
    root = parent;
  }
  std::string socket = SocketNamedIn(root);
  if (socket.empty()) {
    Fail(ENOTSUP, std::string(path) + ": not in a lakecache mount with the native data path (no " +
                      root + "/.lakecache/native)");
    return nullptr;
  }
  auto client = std::make_unique<lc_client>();
  client->mountpoint = root;
  client->socket_path = socket;
  {
    std::lock_guard<std::recursive_mutex> lock(client->mu);
    if (client->Attach() != 0) return nullptr;
  }
  Register(client.get());
  return client.release();
}

void lc_detach(lc_client* client) {
  if (client == nullptr) return;
  Unregister(client);
  {
    std::lock_guard<std::recursive_mutex> lock(client->mu);
    for (lc_file* f : client->files) {
      if (f->fd >= 0) ::close(f->fd);
      delete f;
    }
    client->files.clear();
  }
  delete client;  // closing the socket ends the session: the server lets go of everything
}

const char* lc_mountpoint(const lc_client* client) { return client->mountpoint.c_str(); }

lc_file* lc_open(lc_client* client, const char* path) {
  std::lock_guard<std::recursive_mutex> lock(client->mu);
  if (client->EnsureAttached() != 0) return nullptr;
  std::string rel = client->Relative(path);
  if (rel.size() == 1 && rel[0] == '\0') {
    Fail(EXDEV, std::string(path) + ": not inside the mount at " + client->mountpoint);
    return nullptr;
  }
  std::vector<lc_file*> opened;
  std::vector<std::string> errors;
  if (client->OpenPaths({rel}, &opened, &errors) != 0) return nullptr;
  intptr_t v = reinterpret_cast<intptr_t>(opened[0]);
  if (v < 0 && v > -4096) {
    Fail(static_cast<int>(-v), errors[0]);
    return nullptr;
  }
  client->files.insert(opened[0]);
  return opened[0];
}

lc_file* lc_open_fd(lc_client* client, int fd) {
  std::lock_guard<std::recursive_mutex> lock(client->mu);
  if (client->EnsureAttached() != 0) return nullptr;
  auto f = std::make_unique<lc_file>();
  f->client = client;
  f->fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (f->fd < 0) {
    Fail(errno, std::string("dup: ") + std::strerror(errno));
    return nullptr;
  }
  if (client->Reopen(f.get()) != 0) {
    ::close(f->fd);
    return nullptr;
  }
  client->files.insert(f.get());
  return f.release();
}

uint64_t lc_size(const lc_file* file) { return file->size; }
uint64_t lc_block_size(const lc_file* file) { return file->block_size; }
int lc_version(void) { return LC_NATIVE_VERSION; }

void lc_close(lc_file* file) {
  if (file == nullptr) return;
  lc_client* client = file->client;
  std::lock_guard<std::recursive_mutex> lock(client->mu);
  client->files.erase(file);
  if (file->session == client->session && client->sock >= 0 && client->pid == ::getpid()) {
    wire::MessageHeader h;
    h.type = wire::kClose;
    wire::CloseBody c;
    c.file_id = file->id;
    char msg[sizeof(h) + sizeof(c)];
    std::memcpy(msg, &h, sizeof(h));
    std::memcpy(msg + sizeof(h), &c, sizeof(c));
    wire::SendMessage(client->sock, msg, sizeof(msg), nullptr, 0);
  }
  if (file->fd >= 0) ::close(file->fd);
  delete file;
}

namespace {

// What a read's -errno means for the reader.
std::string ReadError(int64_t result) {
  int err = static_cast<int>(-result);
  if (err == ENOBUFS) {
    return "read: the views this process holds fill the mount's budget for it; release some "
           "(lc_release)";
  }
  if (err == ESTALE) return "read: the object changed since the file was opened; open it again";
  if (err == EPROTO) return "read: the mount's server answered outside its memory";
  return std::string("read: ") + std::strerror(err);
}

// The pieces of one read: split where blocks end, so they run in parallel.
void Split(const lc_file* f, size_t read, uint64_t offset, uint64_t length, char* dst,
           uint32_t max_read, std::vector<Piece>* pieces) {
  if (offset >= f->size) return;
  length = std::min(length, f->size - offset);
  uint64_t step = f->block_size > 0 ? f->block_size : max_read;
  while (length > 0) {
    uint64_t block_end = (offset / step + 1) * step;
    uint64_t n = std::min({length, block_end - offset, uint64_t{max_read}});
    Piece p;
    p.read = read;
    p.offset = offset;
    p.length = n;
    p.dst = dst;
    pieces->push_back(p);
    offset += n;
    length -= n;
    if (dst != nullptr) dst += n;
  }
}

}  // namespace

ssize_t lc_pread(lc_file* file, void* buf, size_t length, uint64_t offset) {
  lc_client* client = file->client;
  std::lock_guard<std::recursive_mutex> lock(client->mu);
  if (client->EnsureAttached() != 0) return -1;
  if (file->session != client->session && client->Reopen(file) != 0) return -1;
  std::vector<lc_file*> files{file};
  std::vector<Piece> pieces;
  Split(file, 0, offset, length, static_cast<char*>(buf), client->max_read, &pieces);
  if (client->Run(files, pieces) != 0) return -1;
  size_t total = 0;
  for (const Piece& p : pieces) {
    if (p.result < 0) return Fail(static_cast<int>(-p.result), ReadError(p.result));
    total += static_cast<size_t>(p.result);
    if (static_cast<uint64_t>(p.result) < p.length) break;
  }
  return static_cast<ssize_t>(total);
}

int lc_view_range(lc_file* file, uint64_t offset, size_t length, lc_view* view) {
  lc_client* client = file->client;
  std::lock_guard<std::recursive_mutex> lock(client->mu);
  *view = {nullptr, 0, 0};
  if (client->EnsureAttached() != 0) return -1;
  if (file->session != client->session && client->Reopen(file) != 0) return -1;
  if (offset >= file->size || length == 0) return 0;
  std::vector<lc_file*> files{file};
  std::vector<Piece> pieces;
  Split(file, 0, offset, length, nullptr, client->max_read, &pieces);
  pieces.resize(1);  // one range, in one block
  if (client->Run(files, pieces) != 0) return -1;
  if (pieces[0].result < 0) return Fail(static_cast<int>(-pieces[0].result), ReadError(pieces[0].result));
  view->data = pieces[0].view;
  view->length = static_cast<size_t>(pieces[0].result);
  view->token = pieces[0].anchor;
  return 0;
}

void lc_release(lc_client* client, lc_view* view) {
  if (view == nullptr || view->token == 0) return;
  std::lock_guard<std::recursive_mutex> lock(client->mu);
  if (client->pid == ::getpid()) {
    client->Release(view->token);
    client->Kick();
  }
  *view = {nullptr, 0, 0};
}

ssize_t lc_read_many(lc_client* client, lc_read* reads, size_t count) {
  std::lock_guard<std::recursive_mutex> lock(client->mu);
  if (client->EnsureAttached() != 0) return -1;
  client->read_errors.assign(count, "");
  std::vector<lc_file*> files(count, nullptr);
  std::vector<bool> owned(count, false);
  std::vector<std::string> paths;
  std::vector<size_t> path_of;
  for (size_t i = 0; i < count; ++i) {
    reads[i].result = 0;
    reads[i].error = nullptr;
    if (reads[i].file != nullptr) {
      files[i] = reads[i].file;
      if (files[i]->session != client->session && client->Reopen(files[i]) != 0) {
        reads[i].result = -errno;
        client->read_errors[i] = t_error;
        files[i] = nullptr;
      }
      continue;
    }
    std::string rel = reads[i].path != nullptr ? client->Relative(reads[i].path) : std::string("\0", 1);
    if (rel.size() == 1 && rel[0] == '\0') {
      reads[i].result = -EXDEV;
      client->read_errors[i] = std::string(reads[i].path ? reads[i].path : "(null)") + ": not inside the mount";
      continue;
    }
    path_of.push_back(i);
    paths.push_back(std::move(rel));
  }
  if (!paths.empty()) {
    std::vector<lc_file*> opened;
    std::vector<std::string> errors;
    if (client->OpenPaths(paths, &opened, &errors) != 0) return -1;
    for (size_t k = 0; k < paths.size(); ++k) {
      size_t i = path_of[k];
      intptr_t v = reinterpret_cast<intptr_t>(opened[k]);
      if (v < 0 && v > -4096) {
        reads[i].result = v;
        client->read_errors[i] = errors[k];
      } else if (opened[k] != nullptr) {
        files[i] = opened[k];
        owned[i] = true;
        client->files.insert(opened[k]);
      } else {
        reads[i].result = -EIO;
        client->read_errors[i] = errors[k];
      }
    }
  }
  std::vector<Piece> pieces;
  for (size_t i = 0; i < count; ++i) {
    if (files[i] == nullptr) continue;
    uint64_t offset = reads[i].offset;
    uint64_t length = reads[i].length;
    uint64_t size = files[i]->size;
    if (length == UINT64_MAX || offset + length > size || offset + length < offset) {
      length = offset < size ? size - offset : 0;
    }
    if (reads[i].buf == nullptr) {
      reads[i].buf = std::malloc(std::max<uint64_t>(1, length));
      if (reads[i].buf == nullptr) {
        reads[i].result = -ENOMEM;
        continue;
      }
    }
    reads[i].length = length;
    Split(files[i], i, offset, length, static_cast<char*>(reads[i].buf), client->max_read, &pieces);
  }
  int run = client->Run(files, pieces);
  for (const Piece& p : pieces) {
    lc_read& r = reads[p.read];
    if (r.result < 0) continue;
    if (p.result < 0) {
      r.result = p.result;
      client->read_errors[p.read] = ReadError(p.result);
    } else {
      r.result += p.result;
    }
  }
  for (size_t i = 0; i < count; ++i) {
    if (owned[i]) lc_close(files[i]);
  }
  if (run != 0) return -1;
  ssize_t ok = 0;
  for (size_t i = 0; i < count; ++i) {
    if (reads[i].result >= 0) {
      ++ok;
    } else {
      reads[i].error = client->read_errors[i].c_str();
    }
  }
  return ok;
}

const char* lc_last_error(void) { return t_error.c_str(); }

}  // extern "C"
