// The FUSE metadata ceiling of this machine: a null read-only file system serving the tree of
// synthetic://N (src/ufs/synthetic_store.h) with our mount's options and timeouts, so that
// `find MOUNTPOINT -type f` over it measures what the kernel and libfuse alone allow for a
// metadata walk. Nothing is kept per inode: an inode number says where its node sits, a lookup
// parses the name, and every answer is computed.
//
//   meta_ceiling MOUNTPOINT --objects N [--threads T]
//
// N: 1M, 10M, 100M (k, M, G are 10^3, 10^6, 10^9) or a plain number; a multiple of 1,000 up to
// 10^9. Up to 1M: folders d000..d999 (as many as needed) of files f000.bin..f999.bin; above, one
// more level (10M: d000..d009, each of d000..d999); 1,000 or fewer: the files at the top. Files are
// 1 KiB (pattern bytes), 0444; folders 0555; one fixed mtime. T: the loop's threads (16, as our
// mount). Runs in the foreground until unmounted or SIGTERM/SIGINT.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "null_fuse.h"

namespace {

namespace lb = lakecache::bench;

constexpr uint64_t kFanout = 1000;  // SyntheticSpec's default: names of 3 digits
constexpr int kWidth = 3;
constexpr uint64_t kMaxObjects = 1'000'000'000;
constexpr uint64_t kFileSize = 1024;
constexpr int64_t kMtime = 1767225600;  // SyntheticStore's, 2026-01-01T00:00:00Z
// Entry and attribute timeouts: our mount's by default (FileSystem::AttrTimeoutSeconds, the
// namespace's metadata_ttl, 60s unless immutable).
constexpr double kTimeout = 60;
// An inode number is a tag (bits 48 and up) and a number: tag 1..2 is a folder that many levels
// below the top, the number its path's digits read in base 1000; kFileTag is a file, the number
// its index. The top is FUSE_ROOT_ID (tag 0).
constexpr int kTagShift = 48;
constexpr uint64_t kFileTag = 3;
constexpr uint64_t kNumberMask = (uint64_t{1} << kTagShift) - 1;

// A node of the tree: a folder `depth` levels below the top (the top: 0, number 0), or a file.
struct Node {
  bool file = false;
  int depth = 0;
  uint64_t number = 0;
};

// The tree's shape, fixed at start; read by every FUSE thread at once.
struct Tree {
  uint64_t objects = 0;
  int levels = 0;       // folder levels above the files (SyntheticStore::levels_)
  uint64_t leaves = 0;  // folders that hold files (the top when levels is 0)
  uid_t uid = 0;        // our mount's files belong to the user who mounted
  gid_t gid = 0;
};

const Tree& TreeOf(fuse_req_t req) { return *static_cast<const Tree*>(fuse_req_userdata(req)); }

Tree MakeTree(uint64_t objects) {
  Tree t;
  t.objects = objects;
  t.leaves = (objects + kFanout - 1) / kFanout;
  for (uint64_t reach = 1; reach < t.leaves; reach *= kFanout) ++t.levels;
  t.uid = ::getuid();
  t.gid = ::getgid();
  return t;
}

// Folders `depth` levels below the top (1 at depth 0).
uint64_t FoldersAt(const Tree& t, int depth) {
  uint64_t span = 1;  // leaves under one folder at `depth`
  for (int l = depth; l < t.levels; ++l) span *= kFanout;
  return (t.leaves + span - 1) / span;
}

// Entries of folder `n`, "." and ".." not counted.
uint64_t ChildCount(const Tree& t, const Node& n) {
  uint64_t total = n.depth == t.levels ? t.objects : FoldersAt(t, n.depth + 1);
  return std::min(kFanout, total - n.number * kFanout);
}

Node ChildOf(const Tree& t, const Node& n, uint64_t i) {
  return Node{n.depth == t.levels, n.depth + 1, n.number * kFanout + i};
}

fuse_ino_t InoOf(const Node& n) {
  if (n.file) return (kFileTag << kTagShift) | n.number;
  if (n.depth == 0) return FUSE_ROOT_ID;
  return (static_cast<uint64_t>(n.depth) << kTagShift) | n.number;
}

// The node of `ino`; none when the tree has no such node.
std::optional<Node> NodeOf(const Tree& t, fuse_ino_t ino) {
  if (ino == FUSE_ROOT_ID) return Node{};
  uint64_t tag = ino >> kTagShift;
  uint64_t number = ino & kNumberMask;
  if (tag == kFileTag) {
    if (number >= t.objects) return std::nullopt;
    return Node{true, t.levels + 1, number};
  }
  if (tag == 0 || tag > static_cast<uint64_t>(t.levels)) return std::nullopt;
  int depth = static_cast<int>(tag);
  if (number >= FoldersAt(t, depth)) return std::nullopt;
  return Node{false, depth, number};
}

// The name of the `i`th entry (below 1,000) of a folder holding files (`file`) or folders, as
// SyntheticStore::KeyOf spells it, NUL-terminated. `out` holds at least 16 bytes.
void NameOf(bool file, uint64_t i, char* out) {
  *out++ = file ? 'f' : 'd';
  for (int d = kWidth - 1; d >= 0; --d, i /= 10) out[d] = static_cast<char>('0' + i % 10);
  std::strcpy(out + kWidth, file ? ".bin" : "");
}

// The entry `name` of folder `n`: its index, or none when the folder has no such entry.
std::optional<uint64_t> ParseName(const Tree& t, const Node& n, std::string_view name) {
  bool files = n.depth == t.levels;
  std::string_view suffix = files ? ".bin" : "";
  if (name.size() != 1 + kWidth + suffix.size() || name[0] != (files ? 'f' : 'd') ||
      !name.ends_with(suffix)) {
    return std::nullopt;
  }
  uint64_t i = 0;
  const char* digits = name.data() + 1;
  auto [end, ec] = std::from_chars(digits, digits + kWidth, i);
  if (ec != std::errc() || end != digits + kWidth || i >= ChildCount(t, n)) return std::nullopt;
  return i;
}

struct stat StatOf(const Tree& t, const Node& n) {
  struct stat st;
  std::memset(&st, 0, sizeof(st));
  st.st_ino = InoOf(n);
  st.st_mode = n.file ? S_IFREG | 0444 : S_IFDIR | 0555;
  st.st_nlink = n.file ? 1 : 2;
  st.st_uid = t.uid;
  st.st_gid = t.gid;
  st.st_size = n.file ? static_cast<off_t>(kFileSize) : 0;
  st.st_blksize = 1 << 20;
  st.st_blocks = static_cast<blkcnt_t>((st.st_size + 511) / 512);
  st.st_mtim.tv_sec = st.st_ctim.tv_sec = st.st_atim.tv_sec = kMtime;
  return st;
}

fuse_entry_param EntryOf(const Tree& t, const Node& n) {
  fuse_entry_param e;
  std::memset(&e, 0, sizeof(e));
  e.ino = InoOf(n);
  e.attr = StatOf(t, n);
  e.attr_timeout = e.entry_timeout = kTimeout;
  return e;
}

void OnInit(void*, fuse_conn_info* conn) {
  conn->max_read = lb::kMaxRead;  // must match the max_read mount option
  conn->max_readahead = std::max<unsigned>(conn->max_readahead, lb::kMaxRead);
  // libfuse's defaults are kept: readdirplus on, in the kernel's auto mode, as our mount has it.
}

void OnLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  const Tree& t = TreeOf(req);
  std::optional<Node> folder = NodeOf(t, parent);
  if (!folder || folder->file) {
    fuse_reply_err(req, folder ? ENOTDIR : ENOENT);
    return;
  }
  std::optional<uint64_t> i = ParseName(t, *folder, name);
  if (!i) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  fuse_entry_param e = EntryOf(t, ChildOf(t, *folder, *i));
  fuse_reply_entry(req, &e);
}

// Nothing is counted, so nothing is forgotten.
void OnForget(fuse_req_t req, fuse_ino_t, uint64_t) { fuse_reply_none(req); }
void OnForgetMulti(fuse_req_t req, size_t, fuse_forget_data*) { fuse_reply_none(req); }

void OnGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  const Tree& t = TreeOf(req);
  std::optional<Node> n = NodeOf(t, ino);
  if (!n) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  struct stat st = StatOf(t, *n);
  fuse_reply_attr(req, &st, kTimeout);
}

// So that a file can be read (cat): its 1 KiB of pattern bytes. Open is libfuse's default.
void OnRead(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info*) {
  char buf[kFileSize];
  size_t start = std::min(static_cast<size_t>(off), static_cast<size_t>(kFileSize));
  size_t length = std::min(size, static_cast<size_t>(kFileSize) - start);
  lb::FillPattern(buf, start, length);
  fuse_reply_buf(req, buf, length);
}

void OnOpendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  std::optional<Node> n = NodeOf(TreeOf(req), ino);
  if (!n || n->file) {
    fuse_reply_err(req, n ? ENOTDIR : ENOENT);
    return;
  }
  fi->fh = 0;
  fi->cache_readdir = 0;  // as our mount: every listing is asked for
  fuse_reply_open(req, fi);
}

void OnReleasedir(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }

// Fills as many entries of folder `ino` from `off` as fit in `size` bytes, with the offsets of
// src/fuse/fuse_ops.cc's ServeDir: "." and ".." at 0 and 1, entry i at i + 2, each entry's next
// offset one past its own.
void ServeDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus) {
  const Tree& t = TreeOf(req);
  std::optional<Node> folder = NodeOf(t, ino);
  if (!folder || folder->file) {
    fuse_reply_err(req, folder ? ENOTDIR : ENOENT);
    return;
  }
  // Reused from request to request and never zeroed: only the entries filled are sent.
  thread_local std::vector<char> buf;
  if (buf.size() < size) buf.resize(size);
  const bool files = folder->depth == t.levels;
  const uint64_t count = ChildCount(t, *folder);
  size_t used = 0;
  char name[16];
  for (uint64_t i = static_cast<uint64_t>(std::max<off_t>(off, 0)); i < count + 2; ++i) {
    Node n = *folder;
    if (i >= 2) {
      n = ChildOf(t, *folder, i - 2);
      NameOf(files, i - 2, name);
    } else {
      std::strcpy(name, i == 0 ? "." : "..");
    }
    fuse_entry_param e = EntryOf(t, n);  // "." and "..": the folder's own, as ServeDir's
    size_t n_bytes = plus ? fuse_add_direntry_plus(req, buf.data() + used, size - used, name, &e,
                                                   static_cast<off_t>(i + 1))
                          : fuse_add_direntry(req, buf.data() + used, size - used, name, &e.attr,
                                              static_cast<off_t>(i + 1));
    if (n_bytes > size - used) break;
    used += n_bytes;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void OnReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  ServeDir(req, ino, size, off, false);
}

void OnReaddirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  ServeDir(req, ino, size, off, true);
}

fuse_lowlevel_ops MakeOps() {
  fuse_lowlevel_ops ops;
  std::memset(&ops, 0, sizeof(ops));
  ops.init = OnInit;
  ops.lookup = OnLookup;
  ops.forget = OnForget;
  ops.forget_multi = OnForgetMulti;
  ops.getattr = OnGetattr;
  ops.read = OnRead;
  ops.opendir = OnOpendir;
  ops.readdir = OnReaddir;
  ops.readdirplus = OnReaddirplus;
  ops.releasedir = OnReleasedir;
  return ops;
}

// "1M", "100M", "10k", "2G", "5000": a count (k, M, G are 10^3, 10^6, 10^9); false when
// malformed, not a multiple of 1,000 or above 10^9.
bool ParseObjects(std::string_view text, uint64_t* out) {
  uint64_t scale = 1;
  if (!text.empty() && (text.back() == 'k' || text.back() == 'K')) scale = 1000;
  if (!text.empty() && text.back() == 'M') scale = 1000 * 1000;
  if (!text.empty() && text.back() == 'G') scale = 1000 * 1000 * 1000;
  if (scale != 1) text.remove_suffix(1);
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return false;
  if (n == 0 || n > kMaxObjects / scale) return false;
  *out = n * scale;
  return *out % kFanout == 0;
}

// Says what was wrong (when `error` is given), then how to call.
int Usage(const std::string& error = "") {
  if (!error.empty()) std::fprintf(stderr, "meta_ceiling: %s\n", error.c_str());
  std::fprintf(stderr,
               "usage: meta_ceiling MOUNTPOINT --objects N [--threads T]\n"
               "Serves the tree of synthetic://N, computed, until unmounted or SIGTERM.\n"
               "N: 1M, 10M, 100M or a plain number; a multiple of 1000, at most 1000000000.\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mountpoint;
  uint64_t objects = 0;
  unsigned threads = 16;  // FuseMountOptions::max_threads
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--objects" && i + 1 < argc) {
      if (!ParseObjects(argv[++i], &objects)) {
        return Usage("invalid --objects '" + std::string(argv[i]) +
                     "' (a multiple of 1000 from 1000 to 1000000000, e.g. 1M, 10M, 250000)");
      }
    } else if (a == "--threads" && i + 1 < argc) {
      int n = std::atoi(argv[++i]);
      if (n <= 0) return Usage("invalid --threads '" + std::string(argv[i]) + "' (1 or more)");
      threads = static_cast<unsigned>(n);
    } else if (a == "-h" || a == "--help") {
      Usage();
      return 0;
    } else if (!a.empty() && a[0] != '-' && mountpoint.empty()) {
      mountpoint = a;
    } else if (a == "--objects" || a == "--threads") {
      return Usage(a + " needs a value");
    } else {
      return Usage("unexpected argument '" + a + "'");
    }
  }
  if (mountpoint.empty()) return Usage("no MOUNTPOINT");
  if (objects == 0) return Usage("no --objects");
  // A shell starts a background job with SIGINT ignored, and libfuse then leaves it so; this
  // binary is meant to be started that way and stopped with either signal.
  std::signal(SIGINT, SIG_DFL);

  Tree tree = MakeTree(objects);
  const fuse_lowlevel_ops ops = MakeOps();
  // Our mount's options (fuse_mount.cc FuseMountOptionString's defaults).
  const std::string opts =
      "ro,fsname=meta_ceiling,subtype=meta_ceiling,max_read=" + std::to_string(lb::kMaxRead) +
      ",default_permissions";
  return lb::ServeFuse("meta_ceiling", mountpoint, opts, ops, &tree, threads, [&] {
    std::fprintf(stderr, "meta_ceiling: serving %s (%" PRIu64 " files, %d folder levels)\n",
                 mountpoint.c_str(), objects, tree.levels);
  });
}
