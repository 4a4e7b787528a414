#include "null_fuse.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace lakecache::bench {
namespace {

constexpr fuse_ino_t kFileIno = 2;
constexpr const char* kFileName = "data";
constexpr size_t kPatternBytes = 4096;

struct NullFuse {
  NullFuseOptions options;
  NullFuseRead read;
};

NullFuse& Self(fuse_req_t req) { return *static_cast<NullFuse*>(fuse_req_userdata(req)); }

struct stat StatOf(fuse_ino_t ino, size_t size) {
  struct stat st;
  std::memset(&st, 0, sizeof(st));
  st.st_ino = ino;
  if (ino == FUSE_ROOT_ID) {
    st.st_mode = S_IFDIR | 0555;
    st.st_nlink = 2;
  } else {
    st.st_mode = S_IFREG | 0444;
    st.st_nlink = 1;
    st.st_size = static_cast<off_t>(size);
    st.st_blocks = static_cast<blkcnt_t>((size + 511) / 512);
  }
  st.st_blksize = 1 << 20;
  return st;
}

void OnInit(void*, fuse_conn_info* conn) {
  conn->max_read = kMaxRead;  // must match the max_read mount option
  conn->max_readahead = std::max<unsigned>(conn->max_readahead, kMaxRead);
}

void OnLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  if (parent != FUSE_ROOT_ID || std::strcmp(name, kFileName) != 0) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  fuse_entry_param e;
  std::memset(&e, 0, sizeof(e));
  e.ino = kFileIno;
  e.attr = StatOf(kFileIno, Self(req).options.size);
  e.attr_timeout = e.entry_timeout = 3600;
  fuse_reply_entry(req, &e);
}

void OnGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  if (ino != FUSE_ROOT_ID && ino != kFileIno) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  struct stat st = StatOf(ino, Self(req).options.size);
  fuse_reply_attr(req, &st, 3600);
}

void OnOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if (ino != kFileIno) {
    fuse_reply_err(req, EISDIR);
    return;
  }
  if ((fi->flags & O_ACCMODE) != O_RDONLY) {
    fuse_reply_err(req, EROFS);
    return;
  }
  fi->keep_cache = Self(req).options.keep_cache ? 1 : 0;
  fuse_reply_open(req, fi);
}

void OnRead(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info*) {
  const NullFuse& fs = Self(req);
  size_t start = std::min(static_cast<size_t>(off), fs.options.size);
  fs.read(req, start, std::min({size, kMaxRead, fs.options.size - start}));
}

void OnReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  if (ino != FUSE_ROOT_ID) {
    fuse_reply_err(req, ENOTDIR);
    return;
  }
  char buf[512];
  size = std::min(size, sizeof(buf));
  size_t used = 0;
  const char* names[] = {".", "..", kFileName};
  for (off_t i = off; i < 3; ++i) {
    struct stat st = StatOf(i == 2 ? kFileIno : FUSE_ROOT_ID, Self(req).options.size);
    size_t n = fuse_add_direntry(req, buf + used, size - used, names[i], &st, i + 1);
    if (n > size - used) break;
    used += n;
  }
  fuse_reply_buf(req, buf, used);
}

int Serve(fuse_session* se, unsigned threads) {
  fuse_loop_config* config = fuse_loop_cfg_create();
  fuse_loop_cfg_set_clone_fd(config, 1);
  fuse_loop_cfg_set_max_threads(config, threads);
  int rc = fuse_session_loop_mt(se, config);
  fuse_loop_cfg_destroy(config);
  return rc;
}

}  // namespace

int ServeFuse(const std::string& name, const std::string& mountpoint,
              const std::string& mount_options, const fuse_lowlevel_ops& ops, void* userdata,
              unsigned threads, const std::function<void()>& on_mounted) {
  const char* fargv[] = {name.c_str(), "-o", mount_options.c_str()};
  fuse_args args = FUSE_ARGS_INIT(3, const_cast<char**>(fargv));
  fuse_session* se = fuse_session_new(&args, &ops, sizeof(ops), userdata);
  if (se == nullptr) {
    std::fprintf(stderr, "%s: could not create the FUSE session\n", name.c_str());
    return 1;
  }
  if (fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, mountpoint.c_str()) != 0) {
    std::fprintf(stderr, "%s: mounting at %s failed\n", name.c_str(), mountpoint.c_str());
    fuse_session_destroy(se);
    return 1;
  }
  if (on_mounted) on_mounted();
  int rc = Serve(se, threads);
  fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  return rc == 0 || rc == SIGTERM || rc == SIGINT || rc == SIGHUP ? 0 : 1;
}

int RunNullFuse(const std::string& mountpoint, const NullFuseOptions& options, NullFuseRead read) {
  NullFuse fs{options, std::move(read)};
  fuse_lowlevel_ops ops;
  std::memset(&ops, 0, sizeof(ops));
  ops.init = OnInit;
  ops.lookup = OnLookup;
  ops.getattr = OnGetattr;
  ops.open = OnOpen;
  ops.read = OnRead;
  ops.readdir = OnReaddir;

  std::string opts = "ro,fsname=" + options.name + ",subtype=" + options.name +
                     ",max_read=" + std::to_string(kMaxRead);
  return ServeFuse(options.name, mountpoint, opts, ops, &fs, options.threads, [&] {
    std::fprintf(stderr, "%s: serving %s/%s (%zu bytes, keep_cache=%d)\n", options.name.c_str(),
                 mountpoint.c_str(), kFileName, options.size, options.keep_cache ? 1 : 0);
  });
}

void FillPattern(char* out, size_t offset, size_t length) {
  static const auto* pattern = [] {
    auto* p = new char[kPatternBytes];
    for (size_t i = 0; i < kPatternBytes; ++i) p[i] = static_cast<char>('a' + (i * 7) % 26);
    return p;
  }();
  for (size_t done = 0; done < length;) {
    size_t at = (offset + done) % kPatternBytes;
    size_t n = std::min(kPatternBytes - at, length - done);
    std::memcpy(out + done, pattern + at, n);
    done += n;
  }
}

bool ParseSize(const char* text, size_t* out) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (end == text || v <= 0) return false;
  std::string unit(end);
  double mult = 1;
  if (unit.empty() || unit == "B") {
    mult = 1;
  } else if (unit == "K" || unit == "KiB") {
    mult = 1024.0;
  } else if (unit == "M" || unit == "MiB") {
    mult = 1024.0 * 1024;
  } else if (unit == "G" || unit == "GiB") {
    mult = 1024.0 * 1024 * 1024;
  } else {
    return false;
  }
  *out = static_cast<size_t>(v * mult);
  return true;
}

}  // namespace lakecache::bench
