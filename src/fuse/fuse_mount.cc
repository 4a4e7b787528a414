#define FUSE_USE_VERSION 312
#include "fuse/fuse_mount.h"

#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "fuse/errno_map.h"

namespace lakecache {

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

constexpr char kFuseErrors[] = "lakecache_fuse_errors_total";
constexpr char kFuseErrorsHelp[] =
    "FUSE requests answered with an error (ENOENT not counted), by operation";

// What every request's handler reaches through fuse_req_userdata: the file system and the
// mount's metrics (cells that record nothing when metrics are off).
struct FuseContext {
  FileSystem* fs = nullptr;
  metrics::Registry* registry = nullptr;
  std::array<metrics::Histogram, kFuseOpCount> durations;
  metrics::Counter read_bytes, written_bytes;
  // The sysfs file of the mount's read-ahead and its KiB (see RaiseReadAhead); empty: left as it
  // is.
  std::string read_ahead_file;
  uint64_t read_ahead_kib = 0;
  std::once_flag read_ahead_once;
};

namespace {

constexpr size_t kMaxRead = 1 << 20;

// Of the kernel's INIT request: where fuse_init_in's flags2 lies (after the 40-byte in-header and
// major, minor, max_readahead, flags), and FUSE_HAS_RESEND (flag bit 39, so bit 7 of flags2);
// FUSE_NOTIFY_RESEND, the notification that asks for the resend. Newer than Debian 12's headers.
constexpr size_t kInitFlags2Offset = sizeof(fuse_in_header) + 4 * sizeof(uint32_t);
constexpr uint32_t kHasResendFlags2Bit = 1u << 7;
constexpr int32_t kNotifyResend = 7;

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

bool SpliceReplies() {
  static const bool on = [] {
    const char* v = std::getenv("LAKECACHE_SPLICE");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}

void OnInit(void*, fuse_conn_info* conn) {
  conn->max_read = kMaxRead;  // must match the max_read mount option
  conn->max_write = kMaxRead;
  // An open with O_TRUNC comes as one open (not a setattr first): a file is replaced whole.
  if ((conn->capable & FUSE_CAP_ATOMIC_O_TRUNC) != 0) conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
  // One O_DIRECT write comes as one request at a time, in order (files are written in order).
  conn->want &= ~FUSE_CAP_ASYNC_DIO;
  conn->max_readahead = std::max<unsigned>(conn->max_readahead, kMaxRead);
  // Replies of bytes that live in a file (a co-located worker's shared memory) are spliced from
  // it: the kernel copies them once, without pinning this process's pages.
  if (SpliceReplies() && (conn->capable & FUSE_CAP_SPLICE_WRITE) != 0) {
    conn->want |= FUSE_CAP_SPLICE_WRITE;
  }
}

void OnLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  auto timer = Timed(req, kLookup);
  FileSystem& fs = Fs(req);
  auto attr = fs.Lookup(parent, name);
  if (!attr.ok()) return ReplyError(req, attr.status(), "lookup");
  fuse_entry_param e = ToEntry(fs, *attr);
  fuse_reply_entry(req, &e);
}

void OnForget(fuse_req_t req, fuse_ino_t, uint64_t) {
  fuse_reply_none(req);  // inode numbers are kept for the life of the mount
}

void OnForgetMulti(fuse_req_t req, size_t, fuse_forget_data*) { fuse_reply_none(req); }

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
  fuse_reply_entry(req, &e);
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
  thread_local std::unique_ptr<char[]> buf(new char[kMaxRead]);
  size = std::min(size, kMaxRead);
  BlockRef pin;
  auto bytes = Fs(req).ReadPinned(fi->fh, static_cast<uint64_t>(off),
                                  std::span<char>(buf.get(), size), &pin);
  if (!bytes.ok()) return ReplyError(req, bytes.status(), "read");
  if (pin != nullptr && pin->fd() >= 0 && SpliceReplies() && bytes->data() >= pin->data() &&
      bytes->data() + bytes->size() <= pin->data() + pin->size()) {
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

void OnRelease(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  auto timer = Timed(req, kRelease);
  Fs(req).Release(fi->fh);
  fuse_reply_err(req, 0);
}

// A folder's entries are listed once at opendir and served from there by offset.
void OnOpendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto timer = Timed(req, kOpendir);
  auto fh = Fs(req).OpenDir(ino);
  if (!fh.ok()) return ReplyError(req, fh.status(), "opendir");
  fi->fh = *fh;
  fi->cache_readdir = 0;
  fuse_reply_open(req, fi);
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
  const std::vector<DirItem>& items = **listed;
  // Not zeroed: the entries fill what is sent (zeroing the kernel's whole request size took a
  // sixth of the server's time on a metadata walk).
  std::unique_ptr<char[]> buf(new char[size]);
  size_t used = 0;
  // Offsets 0 and 1 are "." and ".."; item i is at offset i + 2.
  for (size_t i = static_cast<size_t>(off); i < items.size() + 2; ++i) {
    std::string name = i == 0 ? "." : i == 1 ? ".." : items[i - 2].name;
    FileAttr attr = i < 2 ? FileAttr{ino, true, 0, 0, S_IFDIR, 0, 0} : items[i - 2].attr;
    fuse_entry_param e = ToEntry(fs, attr);
    size_t n = plus ? fuse_add_direntry_plus(req, buf.get() + used, size - used, name.c_str(), &e,
                                             static_cast<off_t>(i + 1))
                    : fuse_add_direntry(req, buf.get() + used, size - used, name.c_str(), &e.attr,
                                        static_cast<off_t>(i + 1));
    if (n > size - used) break;
    used += n;
  }
  fuse_reply_buf(req, buf.get(), used);
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

fuse_lowlevel_ops MakeOps() {
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

}  // namespace

FuseMount::FuseMount(std::shared_ptr<FileSystem> fs, FuseMountOptions options)
    : fs_(std::move(fs)), options_(std::move(options)), context_(std::make_unique<FuseContext>()) {
  context_->fs = fs_.get();
  context_->registry = options_.metrics;
  if (options_.metrics == nullptr) return;
  for (size_t op = 0; op < kFuseOpCount; ++op) {
    context_->durations[op] = options_.metrics->GetHistogram(
        "lakecache_fuse_operation_duration_seconds",
        "FUSE requests: duration from the handler's start to its reply, by operation",
        {{"op", kFuseOpNames[op]}});
  }
  options_.metrics->DeclareCounter(kFuseErrors, kFuseErrorsHelp);
  context_->read_bytes = options_.metrics->GetCounter("lakecache_fuse_read_bytes_total",
                                                      "Bytes read through the mount");
  context_->written_bytes = options_.metrics->GetCounter("lakecache_fuse_written_bytes_total",
                                                         "Bytes written through the mount");
}

FuseMount::~FuseMount() {
  for (fuse_session* se : clones_) fuse_session_destroy(se);
  if (session_ != nullptr) {
    if (mounted_) fuse_session_unmount(session_);
    fuse_remove_signal_handlers(session_);
    fuse_session_destroy(session_);
  }
}

namespace {

// A path field of /proc/self/mountinfo, whose space, tab, newline and backslash are octal escapes.
std::string UnescapeMountField(std::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      out += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                               (field[i + 3] - '0'));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

// The sysfs read-ahead file of the FUSE mount at `mountpoint` (the newest FUSE mount there, found
// in /proc/self/mountinfo); empty when there is none. The mountpoint's folder is resolved, not the
// mountpoint: a stat of the mount would wait for this server, which is not serving yet.
std::string ReadAheadFileOf(const std::string& mountpoint) {
  if (mountpoint.empty()) return "";
  std::error_code ec;
  std::filesystem::path path = std::filesystem::absolute(mountpoint, ec).lexically_normal();
  if (ec) return "";
  if (!path.has_filename()) path = path.parent_path();
  std::filesystem::path dir = std::filesystem::weakly_canonical(path.parent_path(), ec);
  if (ec) return "";
  const std::string target = (dir / path.filename()).string();
  std::ifstream in("/proc/self/mountinfo");
  std::string line, found;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, device, root, point, field;
    if (!(fields >> id >> parent >> device >> root >> point)) continue;
    while (fields >> field && field != "-") {
    }
    std::string type;
    if (!(fields >> type) || !type.starts_with("fuse")) continue;
    if (UnescapeMountField(point) == target) found = device;  // the last is the newest
  }
  return found.empty() ? "" : "/sys/class/bdi/" + found + "/read_ahead_kb";
}

}  // namespace

void FuseMount::SetReadAhead(const std::string& mountpoint) {
  if (options_.kernel_read_ahead == 0) return;
  context_->read_ahead_file = ReadAheadFileOf(mountpoint);
  context_->read_ahead_kib = std::max<uint64_t>(4, options_.kernel_read_ahead / 1024);
}

std::string FuseMountOptionString(const FuseMountOptions& options) {
  // libfuse splits -o at commas unless escaped with a backslash (a cluster's fsname names its
  // masters: "lakecache:cluster:a:7400,b:7400").
  std::string fs_name;
  for (char c : options.fs_name) {
    if (c == ',' || c == '\\') fs_name += '\\';
    fs_name += c;
  }
  std::string opts = std::string(options.read_only ? "ro" : "rw") + ",fsname=" + fs_name +
                     ",subtype=lakecache,max_read=" + std::to_string(kMaxRead);
  if (options.allow_other) opts += ",allow_other";
  if (options.default_permissions) opts += ",default_permissions";
  return opts;
}

fuse_session* NewFuseSession(const std::string& opts, const fuse_lowlevel_ops& ops,
                             void* userdata) {
  const char* argv[] = {"lakecache", "-o", opts.c_str()};
  fuse_args args = FUSE_ARGS_INIT(3, const_cast<char**>(argv));
  fuse_session* session = fuse_session_new(&args, &ops, sizeof(ops), userdata);
  fuse_opt_free_args(&args);  // the session keeps copies of what it parsed
  return session;
}

namespace {
constexpr std::string_view kInitMagic = "lakecache-fuse-init 1\n";
}  // namespace

std::string EncodeFuseInit(const FuseInit& init) {
  return std::string(kInitMagic) + init.options + "\n" + init.request;
}

Result<FuseInit> DecodeFuseInit(std::string_view blob) {
  if (!blob.starts_with(kInitMagic)) {
    return Status::InvalidArgument("not a saved FUSE INIT (no '" +
                                   std::string(kInitMagic.substr(0, kInitMagic.size() - 1)) +
                                   "' header)");
  }
  blob.remove_prefix(kInitMagic.size());
  size_t nl = blob.find('\n');
  if (nl == std::string_view::npos || blob.size() - nl - 1 < sizeof(fuse_in_header)) {
    return Status::InvalidArgument("a saved FUSE INIT that is cut short");
  }
  FuseInit init;
  init.options = std::string(blob.substr(0, nl));
  init.request = std::string(blob.substr(nl + 1));
  fuse_in_header header;
  std::memcpy(&header, init.request.data(), sizeof(header));
  if (header.opcode != FUSE_INIT || header.len != init.request.size()) {
    return Status::InvalidArgument("a saved FUSE INIT whose request is not an INIT");
  }
  return init;
}

bool KernelResends(const FuseInit& init) {
  if (init.request.size() < kInitFlags2Offset + sizeof(uint32_t)) return false;
  uint32_t flags2 = 0;
  std::memcpy(&flags2, init.request.data() + kInitFlags2Offset, sizeof(flags2));
  return (flags2 & kHasResendFlags2Bit) != 0;
}

Status FuseMount::NewSession() {
  std::string opts = FuseMountOptionString(options_);
  session_ = NewFuseSession(opts, MakeOps(), context_.get());
  if (session_ == nullptr)
    return Status::Internal("could not create the FUSE session (" + opts + ")");
  if (fuse_set_signal_handlers(session_) != 0) {
    return Status::Internal("could not install signal handlers");
  }
  return Status::Ok();
}

Status FuseMount::Mount(const std::string& mountpoint) {
  LC_RETURN_IF_ERROR(NewSession());
  if (fuse_session_mount(session_, mountpoint.c_str()) != 0) {
    return Status::IoError("mounting at " + mountpoint +
                           " failed (is /dev/fuse available and fusermount3 installed?)");
  }
  mounted_ = true;
  SetReadAhead(mountpoint);
  return Status::Ok();
}

Status FuseMount::Adopt(int fuse_fd, const std::string& mountpoint, const FuseInit* init,
                        std::function<void(const FuseInit&)> on_init) {
  std::string opts = FuseMountOptionString(options_);
  if (init != nullptr && init->options != opts) {
    return Status::InvalidArgument("the mount was made with other FUSE options (" + init->options +
                                   ") than this server's (" + opts +
                                   "): it cannot take the mount over");
  }
  LC_RETURN_IF_ERROR(NewSession());
  // libfuse adopts an open descriptor given as /dev/fd/N: no mount, and no unmount later.
  std::string dev = "/dev/fd/" + std::to_string(fuse_fd);
  if (fuse_session_mount(session_, dev.c_str()) != 0) {
    return Status::IoError("cannot serve the FUSE connection " + dev);
  }
  adopted_ = true;
  adopted_mountpoint_ = mountpoint;
  SetReadAhead(mountpoint);
  if (init != nullptr) init_ = *init;
  init_.options = opts;
  on_init_ = std::move(on_init);
  return Status::Ok();
}

Status FuseMount::Adopt(std::vector<int> fuse_fds, const std::string& mountpoint,
                        const FuseInit* init, std::function<void(const FuseInit&)> on_init) {
  if (fuse_fds.empty()) return Status::InvalidArgument("no FUSE descriptor to serve");
  LC_RETURN_IF_ERROR(Adopt(fuse_fds[0], mountpoint, init, std::move(on_init)));
  std::string opts = FuseMountOptionString(options_);
  for (size_t i = 1; i < fuse_fds.size(); ++i) {
    fuse_session* se = NewFuseSession(opts, MakeOps(), context_.get());
    if (se == nullptr) return Status::Internal("could not create a FUSE session");
    clones_.push_back(se);
    std::string dev = "/dev/fd/" + std::to_string(fuse_fds[i]);
    if (fuse_session_mount(se, dev.c_str()) != 0) {
      return Status::IoError("cannot serve the FUSE descriptor " + dev);
    }
  }
  return Status::Ok();
}

// Without the resend, what the dead server had read but not answered waits in the kernel for a
// reply that would never come, its callers stuck for good. Those requests are the most recent
// before the first this server reads, on the same descriptor: each gets EINTR (a caller that
// retries on EINTR, as Python does, reads on). Request ids rise by 2; a reply to an id the kernel
// is not waiting for is refused and harms nothing. A statfs of the mountpoint makes sure a first
// request comes.
Status FuseMount::AnswerLostRequests() {
  constexpr uint64_t kSwept = 1 << 15;  // far more than can be in flight
  int fd = fuse_session_fd(session_);
  std::vector<int> fds = {fd};
  for (fuse_session* se : clones_) fds.push_back(fuse_session_fd(se));
  if (!adopted_mountpoint_.empty()) {
    std::string path = adopted_mountpoint_;
    std::thread([path] {
      struct statvfs st;
      ::statvfs(path.c_str(), &st);
    }).detach();
  }
  fuse_buf buf;
  std::memset(&buf, 0, sizeof(buf));
  int n = fuse_session_receive_buf(session_, &buf);
  if (n < static_cast<int>(sizeof(fuse_in_header))) {
    std::free(buf.mem);
    return Status::IoError("the FUSE connection ended while this server took it over");
  }
  fuse_in_header first;
  std::memcpy(&first, buf.mem, sizeof(first));
  uint64_t answered = 0;
  for (uint64_t id = first.unique, k = 0; id > 2 && k < kSwept; ++k) {
    id -= 2;
    fuse_out_header reply{sizeof(fuse_out_header), -EINTR, id};
    for (int f : fds) {  // a reply finds only the requests read on its own descriptor
      if (::write(f, &reply, sizeof(reply)) == static_cast<ssize_t>(sizeof(reply))) ++answered;
    }
  }
  if (answered > 0) {
    spdlog::warn(
        "FUSE: {} request(s) the previous server had not answered got EINTR (this kernel "
        "cannot resend them)",
        answered);
  }
  buf.size = static_cast<size_t>(n);
  fuse_session_process_buf(session_, &buf);
  std::free(buf.mem);
  return Status::Ok();
}

Status FuseMount::StartAdopted() {
  int fd = fuse_session_fd(session_);
  if (!init_.request.empty()) {
    // The kernel sent INIT to the first server only: replay it, so libfuse negotiates the same
    // settings and serves (before it, it answers every request with EIO). Its reply finds no
    // request in the kernel and is dropped.
    fuse_buf buf;
    std::memset(&buf, 0, sizeof(buf));
    buf.size = init_.request.size();
    buf.mem = init_.request.data();
    fuse_session_process_buf(session_, &buf);
    // LAKECACHE_FUSE_RESEND=0 behaves as a kernel without the resend (before 6.9) would.
    const char* resend = std::getenv("LAKECACHE_FUSE_RESEND");
    if (KernelResends(init_) && (resend == nullptr || std::string(resend) != "0")) {
      // FUSE_NOTIFY_RESEND (libfuse 3.14 has no call for it): what the dead server had read but
      // not answered goes back to the queue this server reads.
      fuse_out_header notify{sizeof(fuse_out_header), kNotifyResend, 0};
      if (::write(fd, &notify, sizeof(notify)) == static_cast<ssize_t>(sizeof(notify))) {
        return Status::Ok();
      }
      spdlog::warn("FUSE: asking the kernel to resend the previous server's requests failed: {}",
                   std::strerror(errno));
    }
    return AnswerLostRequests();
  }
  fuse_buf buf;
  std::memset(&buf, 0, sizeof(buf));
  int n = fuse_session_receive_buf(session_, &buf);
  if (n <= 0) {
    std::free(buf.mem);
    return Status::IoError("the FUSE connection ended before its INIT");
  }
  init_.request.assign(static_cast<const char*>(buf.mem), static_cast<size_t>(n));
  if (on_init_) on_init_(init_);
  buf.size = static_cast<size_t>(n);
  fuse_session_process_buf(session_, &buf);
  std::free(buf.mem);
  return Status::Ok();
}

void FuseMount::Stop() {
  stop_ = true;
  // The loop waits on a semaphore a signal interrupts; libfuse's SIGTERM handler ends the
  // session. Sent again until Run returns, in case the loop was between its check and its wait.
  // Each clone's thread waits in read(2), which the signal interrupts.
  while (running_) {
    fuse_session_exit(session_);
    for (fuse_session* se : clones_) fuse_session_exit(se);
    pthread_kill(run_thread_, SIGTERM);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

namespace {
// One pool of threads over every descriptor of the connection, grown as libfuse's multi-threaded
// loop grows its own: a thread is started when none is left waiting for a request (a FORGET, which
// is never answered, does not count), up to `max_threads`, and none is ended. The kernel hands
// each request to the thread that has waited longest, whatever descriptor it waits on, so a shared
// count keeps a one-request-at-a-time walk on the same two warm threads as a single session does;
// a pool per descriptor would pass it round all of theirs. New threads wait on the descriptors in
// turn, each answering on the descriptor it read from.
class SessionPool {
 public:
  SessionPool(std::vector<fuse_session*> sessions, unsigned max_threads)
      : sessions_(std::move(sessions)), max_threads_(std::max(1u, max_threads)) {}

  // Serves until a session ends (unmounted, or the first by libfuse's signal handler) or `stop` is
  // set, then ends every thread.
  void Run(const std::atomic<bool>& stop) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      StartLocked();
    }
    while (!ended_ && !stop && !fuse_session_exited(sessions_.front())) {
      struct timespec ts {
        0, 20 * 1000 * 1000
      };
      nanosleep(&ts, nullptr);
    }
    for (fuse_session* se : sessions_) fuse_session_exit(se);
    std::vector<pthread_t> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      exiting_ = true;  // no thread starts after this
      threads = threads_;
    }
    // A thread blocked reading the device wakes by a signal (the handler only ends the session).
    for (pthread_t t : threads) pthread_kill(t, SIGTERM);
    for (pthread_t t : threads) pthread_join(t, nullptr);
  }

 private:
  struct Worker {
    SessionPool* pool;
    fuse_session* se;
  };

  static void* Loop(void* arg) {
    std::unique_ptr<Worker> worker(static_cast<Worker*>(arg));
    SessionPool& pool = *worker->pool;
    fuse_session* se = worker->se;
    fuse_buf buf;
    std::memset(&buf, 0, sizeof(buf));
    while (!fuse_session_exited(se)) {
      int res = fuse_session_receive_buf(se, &buf);
      if (res == -EINTR || res == -EAGAIN) continue;
      if (res <= 0) break;  // 0: unmounted, the session has ended
      bool forget = false;
      if ((buf.flags & FUSE_BUF_IS_FD) == 0 && buf.size >= sizeof(fuse_in_header)) {
        uint32_t opcode = static_cast<const fuse_in_header*>(buf.mem)->opcode;
        forget = opcode == FUSE_FORGET || opcode == FUSE_BATCH_FORGET;
      }
      if (!forget) {
        std::lock_guard<std::mutex> lock(pool.mu_);
        if (--pool.waiting_ == 0) pool.StartLocked();
      }
      fuse_session_process_buf(se, &buf);
      if (!forget) {
        std::lock_guard<std::mutex> lock(pool.mu_);
        ++pool.waiting_;
      }
    }
    std::free(buf.mem);
    pool.ended_ = true;
    return nullptr;
  }

  void StartLocked() {
    if (exiting_ || threads_.size() >= max_threads_) return;
    auto* worker = new Worker{this, sessions_[threads_.size() % sessions_.size()]};
    pthread_t thread;
    if (pthread_create(&thread, nullptr, &SessionPool::Loop, worker) != 0) {
      delete worker;
      return;
    }
    threads_.push_back(thread);
    ++waiting_;
  }

  const std::vector<fuse_session*> sessions_;
  const unsigned max_threads_;
  std::mutex mu_;
  std::vector<pthread_t> threads_;  // guarded by mu_, as are the two below
  unsigned waiting_ = 0;            // threads not serving a request
  bool exiting_ = false;
  std::atomic<bool> ended_{false};
};
}  // namespace

// Every descriptor is read by one pool of threads. Ends when a session ends (unmounted) or Stop.
Status FuseMount::RunSessions() {
  // The clones need the connection's INIT too: libfuse answers EIO until it has seen one. Their
  // replies find no request in the kernel and are dropped.
  for (fuse_session* se : clones_) {
    fuse_buf buf;
    std::memset(&buf, 0, sizeof(buf));
    buf.size = init_.request.size();
    buf.mem = init_.request.data();
    fuse_session_process_buf(se, &buf);
  }
  std::vector<fuse_session*> all{session_};
  all.insert(all.end(), clones_.begin(), clones_.end());
  SessionPool(std::move(all), options_.max_threads).Run(stop_);
  return Status::Ok();
}

Status FuseMount::Run() {
  run_thread_ = pthread_self();
  running_ = true;
  struct NotRunning {
    std::atomic<bool>& running;
    ~NotRunning() { running = false; }
  } not_running{running_};
  if (stop_) return Status::Ok();
  if (adopted_) LC_RETURN_IF_ERROR(StartAdopted());
  if (stop_) return Status::Ok();
  if (!clones_.empty()) return RunSessions();
  fuse_loop_config* config = fuse_loop_cfg_create();
  // A cloned descriptor dies with this process, and the requests read on it fail: a connection
  // that outlives its server is read on the one descriptor the holder keeps.
  const char* clone = std::getenv("LAKECACHE_FUSE_CLONE_FD");  // measuring: 0 or 1 forces it
  int clone_fd = clone != nullptr ? (std::string(clone) == "1" ? 1 : 0) : (adopted_ ? 0 : 1);
  fuse_loop_cfg_set_clone_fd(config, clone_fd);
  fuse_loop_cfg_set_max_threads(config, options_.max_threads);
  int rc = fuse_session_loop_mt(session_, config);
  fuse_loop_cfg_destroy(config);
  if (mounted_) fuse_session_unmount(session_);
  mounted_ = false;
  if (rc != 0 && rc != SIGTERM && rc != SIGINT && rc != SIGHUP) {
    return Status::IoError("FUSE loop ended with error " + std::to_string(rc));
  }
  return Status::Ok();
}

}  // namespace lakecache
