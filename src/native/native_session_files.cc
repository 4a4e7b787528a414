// A session's socket messages: files opened (by path or descriptor) and closed.
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

namespace {

constexpr size_t kMaxOpenPerMessage = 1024;
constexpr size_t kMaxErrorText = 160;

}  // namespace

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
  } else if (h.type == native::kClose) {
    // A list of file ids (0: none), one per 4 bytes.
    std::vector<uint32_t> ids;
    for (size_t at = sizeof(h); at + sizeof(uint32_t) <= size; at += sizeof(uint32_t)) {
      uint32_t id;
      std::memcpy(&id, data + at, sizeof(id));
      ids.push_back(id);
    }
    CloseFiles(ids);
  }
}

// A file with reads in flight is released by the last of them (FinishRead): a handle is never
// freed under a read.
void NativeSession::CloseFiles(const std::vector<uint32_t>& ids) {
  std::vector<uint64_t> handles;
  {
    MutexLock lock(&mu);
    for (uint32_t id : ids) {
      auto it = files.find(id);
      if (it == files.end()) continue;
      if (file_reads.contains(id)) {
        closing.emplace(id, it->second.fh);
      } else {
        handles.push_back(it->second.fh);
      }
      files.erase(it);
    }
  }
  for (uint64_t fh : handles) server->fs->Release(fh);
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
  // The texts share what is left of one message (the reader receives at most kMaxMessage).
  size_t room = native::kMaxMessage > out.size() ? native::kMaxMessage - out.size() : 0;
  size_t each = errors.empty() ? 0 : std::min(kMaxErrorText, room / errors.size());
  for (const std::string& e : errors) {
    out.append(e.substr(0, each > 0 ? each - 1 : 0));
    out.push_back('\0');
  }
  return out;
}

}  // namespace

// Registers the handle `fh` as a file of this session (its id, size, block size and version into
// *out), or releases it with the reason in *out and *error.
void NativeSession::AddFile(uint64_t fh, native::OpenedFile* out, std::string* error) {
  Result<FileSystem::HandleShape> shape = server->fs->ShapeOf(fh);
  MutexLock lock(&mu);
  if (!shape.ok() || files.size() >= server->options.max_files) {
    out->error = shape.ok() ? EMFILE : StatusToErrno(shape.status());
    *error = shape.ok() ? "too many files open in this session" : shape.status().message();
    server->fs->Release(fh);
    return;
  }
  out->file_id = next_file++;
  out->size = shape->size;
  out->block_size = shape->block_size;
  out->reserved = shape->version;
  files.emplace(out->file_id, File{out->file_id, fh, shape->size, shape->block_size});
}

void NativeSession::OpenPaths(uint64_t request_id, const char* data, size_t size) {
  std::vector<std::string_view> paths;
  bool whole = native::ParseOpenPaths(data, size, kMaxOpenPerMessage, &paths);
  std::vector<native::OpenedFile> entries;
  std::vector<std::string> errors;
  for (std::string_view path : paths) {
    native::OpenedFile out;
    std::string error;
    Result<OpenedFile> opened = server->fs->OpenNativePath(path, reader);
    if (!opened.ok()) {
      out.error = StatusToErrno(opened.status());
      error = opened.status().message();
    } else {
      AddFile(opened->fh, &out, &error);
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
  native::OpenedFile out;
  std::string error;
  dev_t mount_dev;
  {
    MutexLock lock(&server->dev_mu);
    struct stat root;
    if (server->mount_dev == 0 && ::stat(server->options.mountpoint.c_str(), &root) == 0) {
      server->mount_dev = root.st_dev;
    }
    mount_dev = server->mount_dev;
  }
  // Cached attributes only: a descriptor of another FUSE file system must not make this thread
  // wait for its server.
  struct statx st {};
  int flags = ::fcntl(fd, F_GETFL);
  bool ours = false;
  if (::statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_INO, &st) != 0 ||
      flags < 0) {
    out.error = EBADF;
    error = "not an open file";
  } else if (!S_ISREG(st.stx_mode) || makedev(st.stx_dev_major, st.stx_dev_minor) != mount_dev) {
    out.error = EXDEV;
    error = "not a file of this mount";
  } else if ((flags & O_ACCMODE) == O_WRONLY || (flags & O_PATH) != 0) {
    ours = true;
    out.error = EBADF;
    error = "not open for reading";
  } else {
    ours = true;
    Result<OpenedFile> opened = server->fs->OpenNative(st.stx_ino);
    if (!opened.ok()) {
      out.error = StatusToErrno(opened.status());
      error = opened.status().message();
    } else {
      AddFile(opened->fh, &out, &error);
    }
  }
  // The descriptor was the reader's proof. Closing one of this mount is a FLUSH its FUSE threads
  // answer; another file system's may never answer: closed on a thread of its own.
  if (ours) {
    ::close(fd);
  } else if (!server->CloseLater(fd)) {
    ::shutdown(sock.get(), SHUT_RDWR);  // a reader that keeps sending such descriptors ends
  }
  std::string msg = OpenedMessage(request_id, {out}, {error});
  Send(msg.data(), msg.size());
}

}  // namespace lakecache
