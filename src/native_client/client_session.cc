#include "native_client/client.h"

using lcn::Fail;
using lcn::Sqe;
namespace wire = lakecache::native;

namespace lcn {
namespace {
thread_local std::string t_error;
}  // namespace

int Fail(int err, std::string message) {
  t_error = std::move(message);
  errno = err;
  return -1;
}

const char* LastError() { return t_error.c_str(); }

}  // namespace lcn

namespace {

constexpr auto kAttachPatience = std::chrono::seconds(60);  // a restarting server
constexpr auto kAnswerTimeout = std::chrono::seconds(120);

}  // namespace

std::string lcn::SocketNamedIn(const std::string& dir) {
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
  if (socket_path.size() >= sizeof(addr.sun_path))
    return Fail(ENAMETOOLONG, "socket path too long");
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  int s = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (s < 0) return Fail(errno, std::string("socket: ") + std::strerror(errno));
  if (::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int e = errno;
    ::close(s);
    return Fail(e,
                "cannot reach the mount's native socket " + socket_path + ": " + std::strerror(e));
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
  ssize_t n =
      ::poll(&p, 1, 10000) == 1 ? wire::ReceiveMessage(s, buf, sizeof(buf) - 1, fds, &nfds) : -1;
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
  lcn::Mapping st = lcn::MapArena(fds[3], w.staging_bytes);
  int e = errno;
  ::close(fds[0]);
  ::close(fds[3]);
  if (!ok || st.data == nullptr) {
    if (st.data != nullptr) lcn::UnmapArena(st);
    Drop(true);
    return Fail(e, std::string("mapping the native ring: ") + std::strerror(e));
  }
  staging = st;
  max_read = w.max_read;
  anchor_bytes = w.anchor_bytes;
  ++session;
  pid = ::getpid();
  generation = lcn::ForkGeneration();
  return 0;
}

// Connects, waiting out a server that restarts (its socket comes back), then opens the files.
int lc_client::Attach() {
  auto deadline = std::chrono::steady_clock::now() + kAttachPatience;
  for (int attempt = 0;; ++attempt) {
    if (Connect() == 0) break;
    if (errno == EACCES || errno == EPROTO || std::chrono::steady_clock::now() > deadline)
      return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50 * (attempt + 1), 500)));
  }
  for (lc_file* f : files) {
    if (Reopen(f) != 0) f->session = 0;  // its reads fail with the reason
  }
  return 0;
}

int lc_client::EnsureAttached() {
  if (!Ours()) {
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
    lcn::Mapping m = lcn::MapArena(fds[0], a.bytes);
    ::close(fds[0]);
    if (m.data == nullptr)
      return Fail(errno, std::string("mapping node memory: ") + std::strerror(errno));
    arenas[a.arena_id] = m;
    return 0;
  }
  if (h.type == wire::kHold && nfds == 1) {
    keep.push_back(fds[0]);
    return 0;
  }
  for (size_t i = 0; i < nfds; ++i) ::close(fds[i]);
  if (h.type == wire::kOpened && h.request_id == want_request && answer != nullptr) {
    answer->assign(data, data + size);
    return 1;
  }
  if (h.type == wire::kRefused) {
    return Fail(EPROTO,
                "the mount ended the session: " + std::string(data + sizeof(h), size - sizeof(h)));
  }
  return 0;
}

// Reads what the socket holds (waiting for one message when `block`): 1 when the answer to
// `want_request` came, 0 otherwise, -1 when the session ended.
int lc_client::PumpSocket(bool block, uint64_t want_request, std::vector<char>* answer) {
  std::vector<char> buf(wire::kMaxMessage);
  for (;;) {
    pollfd p{sock, POLLIN, 0};
    int ready = ::poll(
        &p, 1, block ? static_cast<int>(std::chrono::milliseconds(kAnswerTimeout).count()) : 0);
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
      const char* nul =
          static_cast<const char*>(std::memchr(text, '\0', static_cast<size_t>(end - text)));
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
      f->version = e.reserved;
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
      return Fail(
          e.error,
          std::string(answer.data() + at + sizeof(e), answer.size() - at - sizeof(e)).c_str());
    }
    if (f->session != 0 && (e.size != f->size || e.reserved != f->version)) {
      CloseIds({e.file_id});
      return Fail(ESTALE, "the file changed while the mount's server restarted");
    }
    f->id = e.file_id;
    f->version = e.reserved;
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
  if (f->session != 0 && (fresh->size != f->size || fresh->version != f->version)) {
    CloseIds({fresh->id});
    return Fail(ESTALE, f->path + ": the object changed while the mount's server restarted");
  }
  f->id = fresh->id;
  f->version = fresh->version;
  f->size = fresh->size;
  f->block_size = fresh->block_size;
  f->session = session;
  return 0;
}

void lc_client::CloseIds(const std::vector<uint32_t>& ids) {
  wire::MessageHeader h;
  h.type = wire::kClose;
  size_t per = (wire::kMaxMessage - sizeof(h)) / sizeof(uint32_t);
  for (size_t at = 0; at < ids.size(); at += per) {
    size_t n = std::min(per, ids.size() - at);
    std::string msg(reinterpret_cast<const char*>(&h), sizeof(h));
    msg.append(reinterpret_cast<const char*>(ids.data() + at), n * sizeof(uint32_t));
    wire::SendMessage(sock, msg.data(), msg.size(), nullptr, 0);
  }
}

bool lc_client::Ended() const {
  pollfd p{sock, POLLRDHUP, 0};
  return sock < 0 ||
         (::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0);
}

void lc_client::Release(uint64_t anchor) {
  if (anchor == 0 || sock < 0) return;
  Sqe e;
  e.op = wire::kRelease;
  e.anchor = anchor;
  while (!wire::SubmitRequest(ring, &rs, e)) {
    Kick();
    if (Ended()) return;  // the session is over: it holds nothing any more
    std::this_thread::yield();
  }
}
