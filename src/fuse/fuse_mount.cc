#define FUSE_USE_VERSION 312
#include "fuse/fuse_mount.h"

#include <fuse_lowlevel.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fuse/errno_map.h"

namespace lakecache {
namespace {

constexpr size_t kMaxRead = 1 << 20;

FileSystem& Fs(fuse_req_t req) { return *static_cast<FileSystem*>(fuse_req_userdata(req)); }

void ReplyError(fuse_req_t req, const Status& status, const char* op) {
  int err = StatusToErrno(status);
  if (err != ENOENT) spdlog::warn("{}: {}", op, status.ToString());
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
  conn->max_readahead = std::max<unsigned>(conn->max_readahead, kMaxRead);
  // Replies of bytes that live in a file (a co-located worker's shared memory) are spliced from
  // it: the kernel copies them once, without pinning this process's pages.
  if (SpliceReplies() && (conn->capable & FUSE_CAP_SPLICE_WRITE) != 0) {
    conn->want |= FUSE_CAP_SPLICE_WRITE;
  }
}

void OnLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
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
  FileSystem& fs = Fs(req);
  auto attr = fs.GetAttr(ino);
  if (!attr.ok()) return ReplyError(req, attr.status(), "getattr");
  struct stat st = ToStat(*attr);
  fuse_reply_attr(req, &st, fs.AttrTimeoutSeconds(ino));
}

void OnOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if ((fi->flags & O_ACCMODE) != O_RDONLY) return (void)fuse_reply_err(req, EROFS);
  auto opened = Fs(req).Open(ino);
  if (!opened.ok()) return ReplyError(req, opened.status(), "open");
  fi->fh = opened->fh;
  fi->keep_cache = opened->keep_cache;
  fuse_reply_open(req, fi);
}

void OnRead(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
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
    fuse_reply_data(req, &bufv, FUSE_BUF_SPLICE_NONBLOCK);
    return;
  }
  fuse_reply_buf(req, bytes->data(), bytes->size());
}

void OnRelease(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  Fs(req).Release(fi->fh);
  fuse_reply_err(req, 0);
}

// A folder's entries are listed once at opendir and served from there by offset.
void OnOpendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto items = Fs(req).ReadDir(ino);
  if (!items.ok()) return ReplyError(req, items.status(), "opendir");
  fi->fh = reinterpret_cast<uint64_t>(new std::vector<DirItem>(std::move(*items)));
  fi->cache_readdir = 0;
  fuse_reply_open(req, fi);
}

void OnReleasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  delete reinterpret_cast<std::vector<DirItem>*>(fi->fh);
  fuse_reply_err(req, 0);
}

void ServeDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi,
              bool plus) {
  FileSystem& fs = Fs(req);
  const auto& items = *reinterpret_cast<std::vector<DirItem>*>(fi->fh);
  std::vector<char> buf(size);
  size_t used = 0;
  // Offsets 0 and 1 are "." and ".."; item i is at offset i + 2.
  for (size_t i = static_cast<size_t>(off); i < items.size() + 2; ++i) {
    std::string name = i == 0 ? "." : i == 1 ? ".." : items[i - 2].name;
    FileAttr attr = i < 2 ? FileAttr{ino, true, 0, 0, S_IFDIR, 0, 0} : items[i - 2].attr;
    fuse_entry_param e = ToEntry(fs, attr);
    size_t n = plus ? fuse_add_direntry_plus(req, buf.data() + used, size - used, name.c_str(), &e,
                                             static_cast<off_t>(i + 1))
                    : fuse_add_direntry(req, buf.data() + used, size - used, name.c_str(), &e.attr,
                                        static_cast<off_t>(i + 1));
    if (n > size - used) break;
    used += n;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void OnReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  ServeDir(req, ino, size, off, fi, false);
}

void OnReaddirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  ServeDir(req, ino, size, off, fi, true);
}

void OnStatfs(fuse_req_t req, fuse_ino_t) {
  struct statvfs st;
  std::memset(&st, 0, sizeof(st));
  st.f_bsize = st.f_frsize = 4096;
  st.f_namemax = 1024;
  st.f_flag = ST_RDONLY;
  fuse_reply_statfs(req, &st);
}

// Everything that would change the tree.
void Erofs(fuse_req_t req) { fuse_reply_err(req, EROFS); }
void OnSetattr(fuse_req_t r, fuse_ino_t, struct stat*, int, fuse_file_info*) { Erofs(r); }
void OnMknod(fuse_req_t r, fuse_ino_t, const char*, mode_t, dev_t) { Erofs(r); }
void OnMkdir(fuse_req_t r, fuse_ino_t, const char*, mode_t) { Erofs(r); }
void OnUnlink(fuse_req_t r, fuse_ino_t, const char*) { Erofs(r); }
void OnSymlink(fuse_req_t r, const char*, fuse_ino_t, const char*) { Erofs(r); }
void OnRename(fuse_req_t r, fuse_ino_t, const char*, fuse_ino_t, const char*, unsigned) {
  Erofs(r);
}
void OnLink(fuse_req_t r, fuse_ino_t, fuse_ino_t, const char*) { Erofs(r); }
void OnWrite(fuse_req_t r, fuse_ino_t, const char*, size_t, off_t, fuse_file_info*) { Erofs(r); }
void OnCreate(fuse_req_t r, fuse_ino_t, const char*, mode_t, fuse_file_info*) { Erofs(r); }
void OnSetxattr(fuse_req_t r, fuse_ino_t, const char*, const char*, size_t, int) { Erofs(r); }
void OnRemovexattr(fuse_req_t r, fuse_ino_t, const char*) { Erofs(r); }

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
  ops.rmdir = OnUnlink;
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
    : fs_(std::move(fs)), options_(std::move(options)) {}

FuseMount::~FuseMount() {
  if (session_ != nullptr) {
    if (mounted_) fuse_session_unmount(session_);
    fuse_remove_signal_handlers(session_);
    fuse_session_destroy(session_);
  }
}

Status FuseMount::Mount(const std::string& mountpoint) {
  std::string opts =
      "ro,fsname=" + options_.fs_name + ",subtype=lakecache,max_read=" + std::to_string(kMaxRead);
  if (options_.allow_other) opts += ",allow_other";
  if (options_.default_permissions) opts += ",default_permissions";
  const char* argv[] = {"lakecache", "-o", opts.c_str()};
  fuse_args args = FUSE_ARGS_INIT(3, const_cast<char**>(argv));
  fuse_lowlevel_ops ops = MakeOps();
  session_ = fuse_session_new(&args, &ops, sizeof(ops), fs_.get());
  if (session_ == nullptr)
    return Status::Internal("could not create the FUSE session (" + opts + ")");
  if (fuse_set_signal_handlers(session_) != 0) {
    return Status::Internal("could not install signal handlers");
  }
  if (fuse_session_mount(session_, mountpoint.c_str()) != 0) {
    return Status::IoError("mounting at " + mountpoint +
                           " failed (is /dev/fuse available and fusermount3 installed?)");
  }
  mounted_ = true;
  return Status::Ok();
}

Status FuseMount::Run() {
  fuse_loop_config* config = fuse_loop_cfg_create();
  fuse_loop_cfg_set_clone_fd(config, 1);
  fuse_loop_cfg_set_max_threads(config, options_.max_threads);
  int rc = fuse_session_loop_mt(session_, config);
  fuse_loop_cfg_destroy(config);
  fuse_session_unmount(session_);
  mounted_ = false;
  if (rc != 0 && rc != SIGTERM && rc != SIGINT && rc != SIGHUP) {
    return Status::IoError("FUSE loop ended with error " + std::to_string(rc));
  }
  return Status::Ok();
}

}  // namespace lakecache
