// The FUSE ceiling of this machine for our read path: a null file system that serves one file from
// a preallocated memory buffer, with the options of our mount (libfuse3 low level, ro, max_read
// 1 MiB, multi-threaded loop with clone_fd). Reads reply with fuse_reply_buf straight from the
// buffer, so the time left is the kernel's and libfuse's, not ours.
//
//   fuse_ceiling MOUNTPOINT [--size 512MiB] [--keep-cache] [--threads N]
//
// The file is MOUNTPOINT/data. Runs in the foreground until unmounted or SIGTERM/SIGINT.
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace {

constexpr size_t kMaxRead = 1 << 20;
constexpr fuse_ino_t kFileIno = 2;
constexpr const char* kFileName = "data";

struct Ceiling {
  std::unique_ptr<char[]> buf;
  size_t size = 0;
  bool keep_cache = false;
};

Ceiling& Self(fuse_req_t req) { return *static_cast<Ceiling*>(fuse_req_userdata(req)); }

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
  e.attr = StatOf(kFileIno, Self(req).size);
  e.attr_timeout = e.entry_timeout = 3600;
  fuse_reply_entry(req, &e);
}

void OnGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  if (ino != FUSE_ROOT_ID && ino != kFileIno) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  struct stat st = StatOf(ino, Self(req).size);
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
  fi->keep_cache = Self(req).keep_cache ? 1 : 0;
  fuse_reply_open(req, fi);
}

void OnRead(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info*) {
  const Ceiling& c = Self(req);
  size_t start = std::min(static_cast<size_t>(off), c.size);
  size_t n = std::min({size, kMaxRead, c.size - start});
  fuse_reply_buf(req, c.buf.get() + start, n);
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
    struct stat st = StatOf(i == 2 ? kFileIno : FUSE_ROOT_ID, Self(req).size);
    size_t n = fuse_add_direntry(req, buf + used, size - used, names[i], &st, i + 1);
    if (n > size - used) break;
    used += n;
  }
  fuse_reply_buf(req, buf, used);
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

int Usage() {
  std::fprintf(stderr,
               "usage: fuse_ceiling MOUNTPOINT [--size 512MiB] [--keep-cache] [--threads N]\n"
               "Serves MOUNTPOINT/data (pattern bytes) from memory until unmounted or SIGTERM.\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Ceiling c;
  c.size = size_t{512} << 20;
  std::string mountpoint;
  unsigned threads = 16;  // FuseMountOptions::max_threads
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--size" && i + 1 < argc) {
      if (!ParseSize(argv[++i], &c.size)) return Usage();
    } else if (a == "--keep-cache") {
      c.keep_cache = true;
    } else if (a == "--threads" && i + 1 < argc) {
      threads = static_cast<unsigned>(std::atoi(argv[++i]));
    } else if (a == "-h" || a == "--help") {
      Usage();
      return 0;
    } else if (!a.empty() && a[0] != '-' && mountpoint.empty()) {
      mountpoint = a;
    } else {
      return Usage();
    }
  }
  if (mountpoint.empty()) return Usage();

  // Preallocated and touched up front, so no read pays for a page fault.
  c.buf.reset(new char[c.size + 1]);
  char pattern[4096];
  for (size_t i = 0; i < sizeof(pattern); ++i) pattern[i] = static_cast<char>('a' + (i * 7) % 26);
  for (size_t off = 0; off < c.size; off += sizeof(pattern)) {
    std::memcpy(c.buf.get() + off, pattern, std::min(sizeof(pattern), c.size - off));
  }

  fuse_lowlevel_ops ops;
  std::memset(&ops, 0, sizeof(ops));
  ops.init = OnInit;
  ops.lookup = OnLookup;
  ops.getattr = OnGetattr;
  ops.open = OnOpen;
  ops.read = OnRead;
  ops.readdir = OnReaddir;

  std::string opts =
      "ro,fsname=fuse_ceiling,subtype=fuse_ceiling,max_read=" + std::to_string(kMaxRead);
  const char* fargv[] = {"fuse_ceiling", "-o", opts.c_str()};
  fuse_args args = FUSE_ARGS_INIT(3, const_cast<char**>(fargv));
  fuse_session* se = fuse_session_new(&args, &ops, sizeof(ops), &c);
  if (se == nullptr) {
    std::fprintf(stderr, "fuse_ceiling: could not create the FUSE session\n");
    return 1;
  }
  if (fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, mountpoint.c_str()) != 0) {
    std::fprintf(stderr, "fuse_ceiling: mounting at %s failed\n", mountpoint.c_str());
    fuse_session_destroy(se);
    return 1;
  }
  std::fprintf(stderr, "fuse_ceiling: serving %s/%s (%zu bytes, keep_cache=%d)\n",
               mountpoint.c_str(), kFileName, c.size, c.keep_cache ? 1 : 0);
  fuse_loop_config* config = fuse_loop_cfg_create();
  fuse_loop_cfg_set_clone_fd(config, 1);
  fuse_loop_cfg_set_max_threads(config, threads);
  int rc = fuse_session_loop_mt(se, config);
  fuse_loop_cfg_destroy(config);
  fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  return rc == 0 || rc == SIGTERM || rc == SIGINT || rc == SIGHUP ? 0 : 1;
}
