#include "fuse/fuse_ops.h"

#include <fcntl.h>
#include <linux/fuse.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "common/errno_map.h"
#include "common/scoped_fd.h"

namespace lakecache {
namespace {

// The operations timed, each a label value of lakecache_fuse_operation_duration_seconds.
enum FuseOp : size_t {
  kLookup,
  kGetattr,
  kOpen,
  kCreate,
  kRead,
  kWrite,
  kFlush,
  kFsync,
  kRelease,
  kSetattr,
  kMkdir,
  kRmdir,
  kUnlink,
  kRename,
  kOpendir,
  kReaddir,
  kStatfs,
  kFuseOpCount
};
constexpr std::array<const char*, kFuseOpCount> kFuseOpNames = {
    "lookup",  "getattr", "open",  "create", "read",   "write",   "flush",   "fsync", "release",
    "setattr", "mkdir",   "rmdir", "unlink", "rename", "opendir", "readdir", "statfs"};

static_assert(kFuseOpCount == kTimedFuseOps);

constexpr char kFuseErrors[] = "lakecache_fuse_errors_total";
constexpr char kFuseErrorsHelp[] =
    "FUSE requests answered with an error (ENOENT not counted), by operation";

FuseContext& Ctx(fuse_req_t req) { return *static_cast<FuseContext*>(fuse_req_userdata(req)); }
FileSystem& Fs(fuse_req_t req) { return *Ctx(req).fs; }

// The request's duration, observed when the handler returns (after its reply).
metrics::ScopedTimer Timed(fuse_req_t req, FuseOp op) {
  return metrics::ScopedTimer(Ctx(req).durations[op]);
}

void ReplyError(fuse_req_t req, const Status& status, const char* op) {
  int err = StatusToErrno(status);
  if (err != ENOENT) {
    spdlog::warn("{}: {}", op, status.ToString());
    if (metrics::Registry* registry = Ctx(req).registry) {
      registry->GetCounter(kFuseErrors, kFuseErrorsHelp, {{"op", op}}).Add();
    }
  }
  fuse_reply_err(req, err);
}

struct stat ToStat(const FileAttr& a) {
  struct stat st;
  std::memset(&st, 0, sizeof(st));
  st.st_ino = a.ino;
  st.st_mode = a.mode;
  st.st_nlink = a.is_dir ? 2 : 1;
  st.st_uid = a.uid;
  st.st_gid = a.gid;
  st.st_size = static_cast<off_t>(a.size);
  st.st_blksize = 1 << 20;
  st.st_blocks = static_cast<blkcnt_t>((a.size + 511) / 512);
  st.st_mtim.tv_sec = st.st_ctim.tv_sec = st.st_atim.tv_sec = a.mtime;
  return st;
}

fuse_entry_param ToEntry(FileSystem& fs, const FileAttr& a) {
  fuse_entry_param e;
  std::memset(&e, 0, sizeof(e));
  e.ino = a.ino;
  e.attr = ToStat(a);
  e.attr_timeout = e.entry_timeout = fs.AttrTimeoutSeconds(a.ino);
  return e;
}

void OnInit(void* userdata, fuse_conn_info* conn) {
  const FuseContext& ctx = *static_cast<const FuseContext*>(userdata);
  conn->max_read = kFuseMaxRead;  // must match the max_read mount option
  conn->max_write = kFuseMaxRead;
  // An open with O_TRUNC comes as one open (not a setattr first): a file is replaced whole.
  if ((conn->capable & FUSE_CAP_ATOMIC_O_TRUNC) != 0) conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
  // One O_DIRECT write comes as one request at a time, in order (files are written in order).
  conn->want &= ~FUSE_CAP_ASYNC_DIO;
  conn->max_readahead = std::max<unsigned>(conn->max_readahead, kFuseMaxRead);
  // Replies of bytes that live in a file (a co-located worker's shared memory) are spliced from
  // it: the kernel copies them once, without pinning this process's pages.
  if (ctx.splice && (conn->capable & FUSE_CAP_SPLICE_WRITE) != 0) {
    conn->want |= FUSE_CAP_SPLICE_WRITE;
  }
  if (ctx.readdirplus.mode() == ReaddirplusMode::kNever) {
    conn->want &= ~(FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO);
  }
}

void OnLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  auto timer = Timed(req, kLookup);
  FileSystem& fs = Fs(req);
  auto attr = fs.Lookup(parent, name);
  if (!attr.ok()) return ReplyError(req, attr.status(), "lookup");
  if (!attr->is_dir) Ctx(req).readdirplus.LookedUpFile();
  fuse_entry_param e = ToEntry(fs, *attr);
  // An interrupted lookup's answer never reached the kernel, which then keeps no count of it.
  if (fuse_reply_entry(req, &e) != 0) fs.Forget(attr->ino, 1);
}

void OnForget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  Fs(req).Forget(ino, nlookup);
  fuse_reply_none(req);
}

void OnForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  FileSystem& fs = Fs(req);
  for (size_t i = 0; i < count; ++i) fs.Forget(forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
}

void OnGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  auto timer = Timed(req, kGetattr);
  FileSystem& fs = Fs(req);
  auto attr = fs.GetAttr(ino);
  if (!attr.ok()) return ReplyError(req, attr.status(), "getattr");
  struct stat st = ToStat(*attr);
  fuse_reply_attr(req, &st, fs.AttrTimeoutSeconds(ino));
}

Caller CallerOf(fuse_req_t req) { return Caller{fuse_req_ctx(req)->pid}; }

// The kernel sizes a FUSE mount's read-ahead by its backing device's, which starts at the kernel's
// default (128 KiB) and which the INIT reply can only lower: a 200 KiB file then takes two READ
// requests and a sequential read eight per MiB, each a round trip through this process. Raised to
// max_read (FuseMountOptions::kernel_read_ahead, through sysfs: root only; elsewhere it stays as
// it is), each of them is one READ. After INIT, whose reply would lower it again: at the first
// open.
void RaiseReadAhead(FuseContext& ctx) {
  if (ctx.read_ahead_file.empty()) return;
  std::FILE* f = std::fopen(ctx.read_ahead_file.c_str(), "w");
  bool done = f != nullptr &&
              std::fprintf(f, "%llu\n", static_cast<unsigned long long>(ctx.read_ahead_kib)) > 0;
  if (f != nullptr && std::fclose(f) != 0) done = false;
  if (done) {
    spdlog::debug("read-ahead of the mount: {} KiB ({})", ctx.read_ahead_kib, ctx.read_ahead_file);
  } else {
    spdlog::debug("read-ahead of the mount left at the kernel's default: cannot write {}: {}",
                  ctx.read_ahead_file, std::strerror(errno));
  }
}

void OnOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto timer = Timed(req, kOpen);
  std::call_once(Ctx(req).read_ahead_once, RaiseReadAhead, std::ref(Ctx(req)));
  auto opened = Fs(req).Open(ino, fi->flags, CallerOf(req));
  if (!opened.ok()) return ReplyError(req, opened.status(), "open");
  fi->fh = opened->fh;
  fi->keep_cache = opened->keep_cache;
  // A close of a file opened to read sends no FLUSH: it never waits for a restarting server.
  fi->noflush = (fi->flags & O_ACCMODE) == O_RDONLY;
  // A file being written bypasses the page cache: readers in this mount keep the old object's
  // pages until the new one is committed.
  fi->direct_io = opened->writing;
  fuse_reply_open(req, fi);
}

void OnCreate(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
              fuse_file_info* fi) {
  auto timer = Timed(req, kCreate);
  if (!S_ISREG(mode)) return (void)fuse_reply_err(req, EPERM);
  FileSystem& fs = Fs(req);
  auto created = fs.Create(parent, name, fi->flags, CallerOf(req));
  if (!created.ok()) return ReplyError(req, created.status(), "create");
  fi->fh = created->file.fh;
  fi->direct_io = 1;
  fuse_entry_param e = ToEntry(fs, created->attr);
  fuse_reply_create(req, &e, fi);
}

void OnWrite(fuse_req_t req, fuse_ino_t, const char* buf, size_t size, off_t off,
             fuse_file_info* fi) {
  auto timer = Timed(req, kWrite);
  auto n = Fs(req).Write(fi->fh, static_cast<uint64_t>(off), std::span<const char>(buf, size),
                         CallerOf(req));
  if (!n.ok()) return ReplyError(req, n.status(), "write");
  Ctx(req).written_bytes.Add(static_cast<double>(*n));  // before the reply, which frees `req`
  fuse_reply_write(req, *n);
}

void OnFlush(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  auto timer = Timed(req, kFlush);
  Status s = Fs(req).Flush(fi->fh, CallerOf(req));
  if (!s.ok()) return ReplyError(req, s, "close");
  fuse_reply_err(req, 0);
}

void OnFsync(fuse_req_t req, fuse_ino_t, int, fuse_file_info* fi) {
  auto timer = Timed(req, kFsync);
  Status s = Fs(req).Fsync(fi->fh);
  if (!s.ok()) return ReplyError(req, s, "fsync");
  fuse_reply_err(req, 0);
}

void OnSetattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info* fi) {
  auto timer = Timed(req, kSetattr);
  FileSystem& fs = Fs(req);
  // A mount with nothing to write is mounted read-write only for its control file.
  if (!fs.writable() && !FileSystem::IsControl(ino)) return (void)fuse_reply_err(req, EROFS);
  std::optional<uint64_t> size;
  if ((to_set & FUSE_SET_ATTR_SIZE) != 0) size = static_cast<uint64_t>(attr->st_size);
  // Mode, owner and times are accepted and not kept (cp -p, tar): objects have none.
  auto now = fs.SetAttr(ino, size, fi != nullptr ? fi->fh : 0);
  if (!now.ok()) return ReplyError(req, now.status(), "setattr");
  struct stat st = ToStat(*now);
  fuse_reply_attr(req, &st, fs.AttrTimeoutSeconds(ino));
}

void OnMkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t) {
  auto timer = Timed(req, kMkdir);
  FileSystem& fs = Fs(req);
  auto attr = fs.MakeDir(parent, name);
  if (!attr.ok()) return ReplyError(req, attr.status(), "mkdir");
  fuse_entry_param e = ToEntry(fs, *attr);
  if (fuse_reply_entry(req, &e) != 0) fs.Forget(attr->ino, 1);
}

void OnRmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  auto timer = Timed(req, kRmdir);
  Status s = Fs(req).RemoveDir(parent, name);
  if (!s.ok()) return ReplyError(req, s, "rmdir");
  fuse_reply_err(req, 0);
}

void OnUnlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  auto timer = Timed(req, kUnlink);
  Status s = Fs(req).Unlink(parent, name);
  if (!s.ok()) return ReplyError(req, s, "unlink");
  fuse_reply_err(req, 0);
}

void OnRename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t new_parent,
              const char* new_name, unsigned flags) {
  auto timer = Timed(req, kRename);
  Status s = Fs(req).Rename(parent, name, new_parent, new_name, flags);
  if (!s.ok()) return ReplyError(req, s, "rename");
  fuse_reply_err(req, 0);
}

void OnRead(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
  auto timer = Timed(req, kRead);
  // One buffer per FUSE thread, reused: no allocation per read. A range within one block held in
  // memory is replied straight from the block, pinned until the reply has been written.
  thread_local std::unique_ptr<char[]> buf(new char[kFuseMaxRead]);
  size = std::min(size, kFuseMaxRead);
  BlockRef pin;
  auto bytes = Fs(req).ReadPinned(fi->fh, static_cast<uint64_t>(off),
                                  std::span<char>(buf.get(), size), &pin);
  if (!bytes.ok()) return ReplyError(req, bytes.status(), "read");
  if (pin != nullptr && pin->fd() >= 0 && bytes->size() <= Ctx(req).splice_max &&
      bytes->data() >= pin->data() && bytes->data() + bytes->size() <= pin->data() + pin->size()) {
    fuse_bufvec bufv{};  // FUSE_BUFVEC_INIT is a C compound literal
    bufv.count = 1;
    bufv.buf[0].size = bytes->size();
    bufv.buf[0].flags = static_cast<fuse_buf_flags>(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
    bufv.buf[0].fd = pin->fd();
    bufv.buf[0].pos = static_cast<off_t>(pin->fd_offset() + (bytes->data() - pin->data()));
    // Counted before the reply: the reply frees `req`.
    Ctx(req).read_bytes.Add(static_cast<double>(bytes->size()));
    fuse_reply_data(req, &bufv, FUSE_BUF_SPLICE_NONBLOCK);
    return;
  }
  Ctx(req).read_bytes.Add(static_cast<double>(bytes->size()));
  fuse_reply_buf(req, bytes->data(), bytes->size());
}

// The largest reply libfuse splices (fuse_send_data_iov): it needs a pipe that holds the reply,
// its header and three pages more, and grows the pipe once; when that fails (a pipe larger than
// fs.pipe-max-size, 1 MiB by default, needs CAP_SYS_RESOURCE in the first user namespace) it copies
// the reply into a buffer, then into the kernel. A pipe made here tells how far pipes grow.
size_t LargestSplicedReply() {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t overhead = 3 * page + sizeof(fuse_out_header);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return 0;
  ScopedFd read_end(fds[0]), write_end(fds[1]);
  for (size_t want = kFuseMaxRead + overhead; want > 2 * page + overhead; want /= 2) {
    int got = ::fcntl(read_end.get(), F_SETPIPE_SZ, static_cast<int>(want));
    if (got > 0 && static_cast<size_t>(got) > overhead) {
      return std::min(kFuseMaxRead, static_cast<size_t>(got) - overhead);
    }
  }
  return 0;
}

void OnRelease(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  auto timer = Timed(req, kRelease);
  Fs(req).Release(fi->fh);
  fuse_reply_err(req, 0);
}

// A folder's entries are listed once at opendir and served from there by offset.
// A folder of many pages is answered as its first page comes: this thread lists the rest while
// the reader reads what came (ServeDir waits for what it asks for).
void OnOpendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto timer = Timed(req, kOpendir);
  Fs(req).OpenDir(ino, [req, fi](Result<uint64_t> fh) {
    if (!fh.ok()) return ReplyError(req, fh.status(), "opendir");
    fi->fh = *fh;
    fi->cache_readdir = 0;
    fuse_reply_open(req, fi);
  });
}

void OnReleasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  Fs(req).ReleaseDir(fi->fh);
  fuse_reply_err(req, 0);
}

void ServeDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi,
              bool plus) {
  FileSystem& fs = Fs(req);
  auto listed = fs.DirItems(fi->fh, ino);
  if (!listed.ok()) return ReplyError(req, listed.status(), "readdir");
  const OpenFolder& folder = **listed;
  // A folder served as its pages come: the entry asked for, once it came (or the listing's end).
  if (Status came = fs.WaitForEntry(folder, static_cast<size_t>(std::max<off_t>(off, 2)) - 2);
      !came.ok()) {
    return ReplyError(req, came, "readdir");
  }
  // Not zeroed: the entries fill what is sent (zeroing the kernel's whole request size took a
  // sixth of the server's time on a metadata walk).
  std::unique_ptr<char[]> buf(new char[size]);
  size_t used = 0;
  // Every entry but "." and ".." that readdirplus returns with its attributes counts as a lookup
  // for the kernel; the policy says how many go so (the rest go bare: node 0, which the kernel
  // lists without making an inode of it).
  std::vector<uint64_t> acquired;
  std::string scratch, name;  // reused from entry to entry
  ReaddirplusPolicy& policy = Ctx(req).readdirplus;
  const bool whole = policy.Whole(static_cast<uint64_t>(std::max<off_t>(off, 2)) - 2);
  uint64_t bare = 0;
  // Offsets 0 and 1 are "." and ".."; item i is at offset i + 2.
  for (size_t i = static_cast<size_t>(off); i < folder.size() + 2; ++i) {
    FileSystem::ListedItem item{i == 0 ? "." : "..", FileAttr{ino, true, 0, 0, S_IFDIR, 0, 0}};
    const bool with_attributes = plus && i >= 2 && policy.WithAttributes(i - 2, whole);
    if (i >= 2) {
      Result<FileSystem::ListedItem> listed_item =
          fs.Listed(ino, folder, i - 2, with_attributes, &scratch);
      if (!listed_item.ok()) break;
      item = *listed_item;
    }
    const bool held = with_attributes && !FileSystem::IsControl(item.attr.ino);
    if (held) acquired.push_back(item.attr.ino);
    name.assign(item.name);  // fuse_add_direntry* take a NUL-terminated name
    fuse_entry_param e = ToEntry(fs, item.attr);
    if (plus && i >= 2 && !with_attributes) e.ino = 0;
    size_t n = plus ? fuse_add_direntry_plus(req, buf.get() + used, size - used, name.c_str(), &e,
                                             static_cast<off_t>(i + 1))
                    : fuse_add_direntry(req, buf.get() + used, size - used, name.c_str(), &e.attr,
                                        static_cast<off_t>(i + 1));
    if (n > size - used) {
      if (held) {
        fs.Forget(acquired.back(), 1);  // not sent
        acquired.pop_back();
      }
      break;
    }
    used += n;
    bare += i >= 2 && !with_attributes ? 1 : 0;
  }
  if (bare > 0) policy.SentBare(bare);
  if (fuse_reply_buf(req, buf.get(), used) != 0) {
    for (uint64_t held : acquired) fs.Forget(held, 1);
  }
}

void OnReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  auto timer = Timed(req, kReaddir);
  ServeDir(req, ino, size, off, fi, false);
}

void OnReaddirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  auto timer = Timed(req, kReaddir);
  ServeDir(req, ino, size, off, fi, true);
}

void OnStatfs(fuse_req_t req, fuse_ino_t) {
  auto timer = Timed(req, kStatfs);
  struct statvfs st;
  std::memset(&st, 0, sizeof(st));
  st.f_bsize = st.f_frsize = 4096;
  st.f_namemax = 1024;
  if (Fs(req).writable()) {
    // An object store has no fixed size: tools that check for room before they write find plenty.
    st.f_blocks = st.f_bfree = st.f_bavail = 1ull << 38;  // 1 PiB of 4 KiB blocks
    st.f_files = st.f_ffree = 1ull << 32;
  } else {
    st.f_flag = ST_RDONLY;
  }
  fuse_reply_statfs(req, &st);
}

// What objects cannot be: special files, links, extended attributes. A mount with nothing to
// write (mounted read-write only for its control file) says EROFS, as a read-only mount would.
void NotSupported(fuse_req_t req, int error = EPERM) {
  fuse_reply_err(req, Fs(req).writable() ? error : EROFS);
}
void OnMknod(fuse_req_t r, fuse_ino_t, const char*, mode_t, dev_t) { NotSupported(r); }
void OnSymlink(fuse_req_t r, const char*, fuse_ino_t, const char*) { NotSupported(r); }
void OnLink(fuse_req_t r, fuse_ino_t, fuse_ino_t, const char*) { NotSupported(r); }
void OnSetxattr(fuse_req_t r, fuse_ino_t, const char*, const char*, size_t, int) {
  NotSupported(r, ENOTSUP);
}
void OnRemovexattr(fuse_req_t r, fuse_ino_t, const char*) { NotSupported(r, ENOTSUP); }

}  // namespace

fuse_lowlevel_ops MakeFuseOps() {
  fuse_lowlevel_ops ops;
  std::memset(&ops, 0, sizeof(ops));
  ops.init = OnInit;
  ops.lookup = OnLookup;
  ops.forget = OnForget;
  ops.forget_multi = OnForgetMulti;
  ops.getattr = OnGetattr;
  ops.open = OnOpen;
  ops.read = OnRead;
  ops.release = OnRelease;
  ops.opendir = OnOpendir;
  ops.readdir = OnReaddir;
  ops.readdirplus = OnReaddirplus;
  ops.releasedir = OnReleasedir;
  ops.statfs = OnStatfs;
  ops.setattr = OnSetattr;
  ops.mknod = OnMknod;
  ops.mkdir = OnMkdir;
  ops.unlink = OnUnlink;
  ops.rmdir = OnRmdir;
  ops.flush = OnFlush;
  ops.fsync = OnFsync;
  ops.symlink = OnSymlink;
  ops.rename = OnRename;
  ops.link = OnLink;
  ops.write = OnWrite;
  ops.create = OnCreate;
  ops.setxattr = OnSetxattr;
  ops.removexattr = OnRemovexattr;
  return ops;
}

std::unique_ptr<FuseContext> NewFuseContext(FileSystem* fs, const FuseMountOptions& options) {
  auto context = std::make_unique<FuseContext>(options.readdirplus);
  context->fs = fs;
  context->registry = options.metrics;
  context->splice = options.splice;
  if (options.splice) {
    context->splice_max = LargestSplicedReply();
    if (context->splice_max < kFuseMaxRead) {
      spdlog::info(
          "FUSE: replies of shared memory over {} KiB are written from its mapping, not spliced "
          "(pipes grow to fs.pipe-max-size without CAP_SYS_RESOURCE)",
          context->splice_max >> 10);
    }
  }
  if (options.metrics == nullptr) return context;
  for (size_t op = 0; op < kFuseOpCount; ++op) {
    context->durations[op] = options.metrics->GetHistogram(
        "lakecache_fuse_operation_duration_seconds",
        "FUSE requests: duration from the handler's start to its reply, by operation",
        {{"op", kFuseOpNames[op]}});
  }
  options.metrics->DeclareCounter(kFuseErrors, kFuseErrorsHelp);
  context->read_bytes = options.metrics->GetCounter("lakecache_fuse_read_bytes_total",
                                                    "Bytes read through the mount");
  context->written_bytes = options.metrics->GetCounter("lakecache_fuse_written_bytes_total",
                                                       "Bytes written through the mount");
  return context;
}

}  // namespace lakecache
