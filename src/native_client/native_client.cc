// The client library of the native data path (lakecache_native.h): libc and the wire headers of
// native/ only, so that any process can load it.
#include "native_client/client.h"

using lcn::Fail;
using lcn::Piece;
using lcn::ReadError;
namespace wire = lakecache::native;

// ---- fork
// ----------------------------------------------------------------------------------------- A child
// of fork() has one thread: a client's lock another thread of the parent held at the fork would
// never be released there. Every client's lock is made anew in the child (which attaches anew on
// its first call: see EnsureAttached).
namespace {
std::mutex g_clients_mu;
std::atomic<uint64_t> g_fork_generation{1};
std::set<lc_client*>* g_clients = new std::set<lc_client*>;  // never destroyed: atfork may run late

void LockRegistry() {
  g_clients_mu.lock();
  lcn::LockArenas();
}
void UnlockRegistry() {
  lcn::UnlockArenas();
  g_clients_mu.unlock();
}
void ChildAfterFork() {
  ++g_fork_generation;
  new (&g_clients_mu) std::mutex();
  lcn::ArenasAfterFork();
  for (lc_client* c : *g_clients) {
    new (&c->mu) std::recursive_mutex();
    // The parent's session is the parent's: this process's copies of its descriptors would keep
    // it (and what it holds) alive after the parent ends it.
    for (int* fd : {&c->sock, &c->submit, &c->complete}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
    c->ring.base = nullptr;  // the parent's ring, mapped here too: left alone
    // Nor may the child keep the parent's holds on a worker's memory.
    for (int fd : c->keep) ::close(fd);
    for (auto& [tag, k] : c->kept) {
      for (int fd : k.fds) ::close(fd);
    }
    c->keep.clear();
    c->kept.clear();
    c->views = 0;
  }
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

uint64_t lcn::ForkGeneration() { return g_fork_generation.load(std::memory_order_relaxed); }

// ---- the C ABI
// ------------------------------------------------------------------------------------

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
  std::string socket = lcn::SocketNamedIn(root);
  if (socket.empty()) {
    Fail(ENOTSUP, std::string(path) + ": not in a lakecache mount with the native data path (no " +
                      (root == "/" ? "" : root) + "/.lakecache/native)");
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
  if (file->session == client->session && client->sock >= 0 && client->Ours()) {
    client->CloseIds({file->id});
  }
  if (file->fd >= 0) ::close(file->fd);
  delete file;
}

ssize_t lc_pread(lc_file* file, void* buf, size_t length, uint64_t offset) {
  lc_client* client = file->client;
  std::lock_guard<std::recursive_mutex> lock(client->mu);
  if (client->EnsureAttached() != 0) return -1;
  if (file->session != client->session && client->Reopen(file) != 0) return -1;
  std::vector<lc_file*> files{file};
  std::vector<Piece> pieces;
  client->Split(file, 0, offset, length, static_cast<char*>(buf), &pieces);
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
  client->Split(file, 0, offset, length, nullptr, &pieces);
  pieces.resize(1);  // one range, in one block
  if (client->Run(files, pieces) != 0) return -1;
  if (pieces[0].result < 0)
    return Fail(static_cast<int>(-pieces[0].result), ReadError(pieces[0].result));
  view->data = pieces[0].view;
  view->length = static_cast<size_t>(pieces[0].result);
  view->token = lc_client::Token(pieces[0].anchor, pieces[0].session);
  return 0;
}

void lc_release(lc_client* client, lc_view* view) {
  if (view == nullptr || view->token == 0) return;
  std::lock_guard<std::recursive_mutex> lock(client->mu);
  // A server that went away holds nothing: the view's holds are this client's now (Drop).
  if (client->Ours() && client->sock >= 0 && client->Ended()) client->Drop(true);
  if (client->Ours() && client->sock >= 0 && (view->token >> 48) == (client->session & 0xffff)) {
    client->Release(view->token & ((1ull << 48) - 1));
    client->Kick();
    if (client->views > 0) --client->views;
  } else if (auto it = client->kept.find(view->token >> 48);
             client->Ours() && it != client->kept.end() && --it->second.views == 0) {
    // The last view of an ended session: its holds on the workers' memory go.
    for (int fd : it->second.fds) ::close(fd);
    client->kept.erase(it);
  }
  *view = {nullptr, 0, 0};
}

}  // extern "C"

namespace {

// The files of a batch: each read's own, or its path's, opened in one call (owned[i]: opened
// here, closed after the batch). A read that cannot start gets its result and message here.
int OpenBatch(lc_client* client, lc_read* reads, size_t count, std::vector<lc_file*>* files,
              std::vector<bool>* owned) {
  std::vector<std::string> paths;
  std::vector<size_t> path_of;
  for (size_t i = 0; i < count; ++i) {
    reads[i].result = 0;
    reads[i].error = nullptr;
    if (reads[i].file != nullptr) {
      (*files)[i] = reads[i].file;
      if ((*files)[i]->session != client->session && client->Reopen((*files)[i]) != 0) {
        reads[i].result = -errno;
        client->read_errors[i] = lcn::LastError();
        (*files)[i] = nullptr;
      }
      continue;
    }
    std::string rel =
        reads[i].path != nullptr ? client->Relative(reads[i].path) : std::string("\0", 1);
    if (rel.size() == 1 && rel[0] == '\0') {
      reads[i].result = -EXDEV;
      client->read_errors[i] =
          std::string(reads[i].path ? reads[i].path : "(null)") + ": not inside the mount";
      continue;
    }
    path_of.push_back(i);
    paths.push_back(std::move(rel));
  }
  if (paths.empty()) return 0;
  std::vector<lc_file*> opened;
  std::vector<std::string> errors;
  if (client->OpenPaths(paths, &opened, &errors) != 0) return -1;
  for (size_t k = 0; k < paths.size(); ++k) {
    size_t i = path_of[k];
    intptr_t v = reinterpret_cast<intptr_t>(opened[k]);
    if (v < 0 && v > -4096) {
      reads[i].result = v;
      client->read_errors[i] = errors[k];
    } else {
      (*files)[i] = opened[k];
      (*owned)[i] = true;
      client->files.insert(opened[k]);  // so that a restart opens it again
    }
  }
  return 0;
}

// The pieces of a batch's reads, each clamped to its file, with the buffers the library gives.
std::vector<Piece> PiecesOf(lc_client* client, lc_read* reads, size_t count,
                            const std::vector<lc_file*>& files) {
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
    client->Split(files[i], i, offset, length, static_cast<char*>(reads[i].buf), &pieces);
  }
  return pieces;
}

}  // namespace

extern "C" {

ssize_t lc_read_many(lc_client* client, lc_read* reads, size_t count) {
  std::lock_guard<std::recursive_mutex> lock(client->mu);
  if (client->EnsureAttached() != 0) return -1;
  client->read_errors.assign(count, "");
  std::vector<lc_file*> files(count, nullptr);
  std::vector<bool> owned(count, false);
  if (OpenBatch(client, reads, count, &files, &owned) != 0) return -1;
  std::vector<Piece> pieces = PiecesOf(client, reads, count, files);
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
  std::vector<uint32_t> done;  // the files opened for the batch, closed in one message
  for (size_t i = 0; i < count; ++i) {
    if (!owned[i]) continue;
    if (files[i]->session == client->session) done.push_back(files[i]->id);
    client->files.erase(files[i]);
    delete files[i];
  }
  if (!done.empty() && client->sock >= 0) client->CloseIds(done);
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

const char* lc_last_error(void) { return lcn::LastError(); }

}  // extern "C"
