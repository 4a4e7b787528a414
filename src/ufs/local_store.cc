#include "ufs/local_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <random>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "ufs/local_files.h"

namespace lakecache {
namespace {

using namespace local_files;  // NOLINT: this file's own helpers

static_assert(sizeof(off_t) == 8, "offsets above 4 GiB need a 64-bit off_t");

constexpr size_t kMaxKeysPerPage = 1000;  // S3's cap, so callers meet pagination here too

// One directory entry that can hold objects: a regular file, or a real directory (symlinked
// directories are skipped so that a link cycle cannot make List loop).
struct DirEntry {
  std::string name;  // with a trailing '/' for directories: sorting then gives S3's key order
  bool is_dir = false;
  struct stat st {};
};

// Returns false when the entry is neither an object nor a directory to descend into.
bool StatEntry(int dir_fd, const char* name, DirEntry* entry) {
  if (::fstatat(dir_fd, name, &entry->st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  if (S_ISLNK(entry->st.st_mode)) {
    if (::fstatat(dir_fd, name, &entry->st, 0) != 0 || !S_ISREG(entry->st.st_mode)) return false;
  }
  entry->is_dir = S_ISDIR(entry->st.st_mode);
  if (!entry->is_dir && !S_ISREG(entry->st.st_mode)) return false;
  entry->name = entry->is_dir ? std::string(name) + "/" : std::string(name);
  return true;
}

// The entries of `path` in key order. A directory that does not exist (any more) is empty: entries
// vanish under a concurrent Delete, and a prefix may name no directory at all.
// The root's staging folder of uploads (`top`) is no directory of objects.
Status ReadDir(const std::string& path, const std::string& name, bool top,
               std::vector<DirEntry>* out) {
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) {
    return errno == ENOENT || errno == ENOTDIR ? Status::Ok() : ErrnoStatus(errno, name);
  }
  errno = 0;
  while (const struct dirent* ent = ::readdir(dir)) {
    std::string_view n = ent->d_name;
    if (n == "." || n == ".." || n.starts_with(kTempPrefix) || (top && n == kUploadsDir)) continue;
    DirEntry entry;
    if (StatEntry(::dirfd(dir), ent->d_name, &entry)) out->push_back(std::move(entry));
    errno = 0;
  }
  int err = errno;
  ::closedir(dir);
  if (err != 0) return ErrnoStatus(err, name);
  std::sort(out->begin(), out->end(),
            [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  return Status::Ok();
}

// One List call. Walks the tree in key order from the deepest directory the prefix names, skipping
// subtrees that lie wholly before the continuation point or collapse into one common prefix.
// The continuation token is the last key or common prefix returned: entries sort after it.
class TreeLister {
 public:
  TreeLister(const std::string& root, std::string name, const ListRequest& request,
             const IoOptions& options)
      : root_(root),
        name_(std::move(name)),
        req_(request),
        options_(options),
        limit_(std::min(static_cast<size_t>(request.max_keys), kMaxKeysPerPage)),
        after_(request.continuation_token) {}

  Result<ListPage> Run() {
    // The deepest directory the prefix names: every matching key lies below it.
    std::string start = req_.prefix.substr(0, req_.prefix.rfind('/') + 1);
    std::vector<std::string_view> segs = Segments(start);
    segs.pop_back();  // the empty tail after start's trailing '/' (or all of an empty start)
    if (std::ranges::count(segs, "..") > 0) {
      return Status::InvalidArgument(name_ + ": '..' is not allowed in a prefix");
    }
    // Keys never hold empty or "." segments, so such a prefix matches nothing.
    if (std::ranges::count(segs, "") + std::ranges::count(segs, ".") == 0) {
      LC_RETURN_IF_ERROR(VisitDir(start));
    }
    return std::move(page_);
  }

 private:
  // `rel` is "" or a directory key ending in '/'.
  Status VisitDir(const std::string& rel) {
    LC_RETURN_IF_ERROR(CheckDeadline(options_, name_));
    std::vector<DirEntry> entries;
    LC_RETURN_IF_ERROR(ReadDir(root_ + "/" + rel, name_ + "/" + rel, rel.empty(), &entries));
    for (const DirEntry& e : entries) {
      if (done_) break;
      if (e.is_dir) {
        LC_RETURN_IF_ERROR(VisitSubdir(rel + e.name));
      } else if ((rel + e.name).starts_with(req_.prefix)) {
        VisitFile(rel + e.name, e.st);
      }
    }
    return Status::Ok();
  }

  Status VisitSubdir(const std::string& dir) {
    bool under_prefix = dir.starts_with(req_.prefix);
    if (!under_prefix && !req_.prefix.starts_with(dir)) return Status::Ok();
    if (dir < after_ && !after_.starts_with(dir)) return Status::Ok();  // every key is < after_
    std::string group = under_prefix ? GroupOf(dir) : "";
    if (group.empty()) return VisitDir(dir);
    // Every key below `dir` shares the common prefix `group`: one entry, if any object exists.
    if (group <= after_) return Status::Ok();
    LC_ASSIGN_OR_RETURN(bool any, HoldsObject(dir));
    if (any) Add(std::move(group), nullptr);
    return Status::Ok();
  }

  void VisitFile(const std::string& key, const struct stat& st) {
    std::string group = GroupOf(key);
    if (group.empty()) {
      Add(key, &st);
    } else {
      Add(std::move(group), nullptr);
    }
  }

  // Adds a key (st set) or a common prefix. Entries come in nondecreasing order, so anything not
  // after after_ was on an earlier page or was just added.
  void Add(std::string entry, const struct stat* st) {
    if (entry <= after_) return;
    if (page_.objects.size() + page_.common_prefixes.size() == limit_) {
      page_.truncated = true;
      page_.next_token = after_;
      done_ = true;
      return;
    }
    if (st != nullptr) {
      page_.objects.push_back(InfoOf(entry, *st));
    } else {
      page_.common_prefixes.push_back(entry);
    }
    after_ = std::move(entry);
  }

  // The common prefix `path` (which starts with the prefix) rolls up into, or "" if none.
  std::string GroupOf(const std::string& path) const {
    if (req_.delimiter.empty()) return "";
    size_t pos = path.find(req_.delimiter, req_.prefix.size());
    if (pos == std::string::npos) return "";
    return path.substr(0, pos + req_.delimiter.size());
  }

  // Directories are not objects: a common prefix exists only if some file lies below it.
  Result<bool> HoldsObject(const std::string& dir) {
    std::vector<DirEntry> entries;
    LC_RETURN_IF_ERROR(ReadDir(root_ + "/" + dir, name_ + "/" + dir, false, &entries));
    for (const DirEntry& e : entries) {
      if (!e.is_dir) return true;
      LC_ASSIGN_OR_RETURN(bool any, HoldsObject(dir + e.name));
      if (any) return true;
    }
    return false;
  }

  const std::string& root_;
  const std::string name_;
  const ListRequest& req_;
  const IoOptions& options_;
  const size_t limit_;
  std::string after_;  // the last entry added, or the continuation token
  ListPage page_;
  bool done_ = false;  // the page is full and one more entry exists
};

}  // namespace

LocalStore::LocalStore(std::string root) {
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(root, ec);
  root_ = (ec ? std::filesystem::path(root) : abs).lexically_normal().string();
  while (!root_.empty() && root_.back() == '/') root_.pop_back();
}

std::string LocalStore::Describe() const { return "file://" + (root_.empty() ? "/" : root_); }

Result<ListPage> LocalStore::List(const ListRequest& request, const IoOptions& options) {
  if (request.max_keys < 1) {
    return Status::InvalidArgument(
        fmt::format("{}: max_keys must be at least 1, got {}", Describe(), request.max_keys));
  }
  LC_RETURN_IF_ERROR(CheckDeadline(options, Describe()));
  struct stat st;
  if (::stat((root_ + "/").c_str(), &st) != 0) return ErrnoStatus(errno, Describe());
  LC_ASSIGN_OR_RETURN(ListPage page, TreeLister(root_, Describe(), request, options).Run());
  // An empty directory listed as a folder shows its marker ("dir/"), as S3 shows one made by
  // mkdir, so the folder exists.
  const std::string& prefix = request.prefix;
  if (request.delimiter == "/" && prefix.size() > 1 && prefix.ends_with('/') &&
      request.continuation_token.empty() && page.objects.empty() && page.common_prefixes.empty() &&
      Precheck(std::string_view(prefix).substr(0, prefix.size() - 1), options, Describe()).ok() &&
      ::stat(PathOf(prefix.substr(0, prefix.size() - 1)).c_str(), &st) == 0 &&
      S_ISDIR(st.st_mode)) {
    page.objects.push_back(ObjectInfo{prefix, 0, "", st.st_mtime});
  }
  return page;
}

Result<ObjectInfo> LocalStore::Head(std::string_view key, const IoOptions& options) {
  LC_RETURN_IF_ERROR(Precheck(key, options, Name(key)));
  struct stat st;
  if (::stat(PathOf(key).c_str(), &st) != 0) return ErrnoStatus(errno, Name(key));
  if (!S_ISREG(st.st_mode)) return Status::NotFound(Name(key) + ": not a regular file");
  return InfoOf(std::string(key), st);
}

Result<ReadReply> LocalStore::ReadRaw(std::string_view key, uint64_t offset,
                                      std::span<const std::span<char>> bufs,
                                      const ReadOptions& options) {
  LC_RETURN_IF_ERROR(Precheck(key, options, Name(key)));
  ScopedFd fd(::open(PathOf(key).c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st;
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, Name(key));
  if (!S_ISREG(st.st_mode)) return Status::NotFound(Name(key) + ": not a regular file");
  if (!options.if_match.empty() && options.if_match != EtagOf(st)) {
    return Status::PreconditionFailed(Name(key) + ": the object changed: ETag is " + EtagOf(st) +
                                      ", expected " + options.if_match);
  }
  ReadReply reply;
  for (std::span<char> buf : bufs) {
    if (offset + reply.bytes >= static_cast<uint64_t>(st.st_size)) break;
    LC_ASSIGN_OR_RETURN(size_t n, PreadFull(fd.get(), offset + reply.bytes, buf, Name(key)));
    reply.bytes += n;
    if (n < buf.size()) break;  // the end of the file
  }
  // A file has no ETag on a read: the version read is the one the file has after it, so a
  // rewrite in place during the read (new size or mtime) names another version.
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, Name(key));
  reply.etag = EtagOf(st);
  reply.object_size = static_cast<uint64_t>(st.st_size);
  return reply;
}

Result<ObjectInfo> LocalStore::Put(std::string_view key, std::span<const char> data,
                                   const PutOptions& options) {
  if (key.ends_with('/') && key.size() > 1 && data.empty()) return PutFolder(key, options);
  LC_RETURN_IF_ERROR(Precheck(key, options, Name(key)));
  LC_RETURN_IF_ERROR(MakeParents(root_, key, Name(key)));
  LC_ASSIGN_OR_RETURN(struct stat st,
                      WriteFileWhole(PathOf(key), Name(key), options.if_none_match,
                                     [&](int fd) { return WriteFull(fd, data, Name(key)); }));
  return InfoOf(std::string(key), st);
}

// A folder's marker ("dir/", as S3 tools make them) is the directory itself here.
Result<ObjectInfo> LocalStore::PutFolder(std::string_view key, const IoOptions& options) {
  std::string_view dir = key.substr(0, key.size() - 1);
  LC_RETURN_IF_ERROR(Precheck(dir, options, Name(key)));
  LC_RETURN_IF_ERROR(MakeParents(root_, dir, Name(key)));
  if (::mkdir(PathOf(dir).c_str(), 0755) != 0 && errno != EEXIST)
    return ErrnoStatus(errno, Name(key));
  struct stat st;
  if (::stat(PathOf(dir).c_str(), &st) != 0) return ErrnoStatus(errno, Name(key));
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument(Name(key) + ": a file, not a folder");
  return ObjectInfo{std::string(key), 0, "d41d8cd98f00b204e9800998ecf8427e", st.st_mtime};
}

Status LocalStore::Delete(std::string_view key, const IoOptions& options) {
  if (key.ends_with('/') && key.size() > 1) {
    std::string_view dir = key.substr(0, key.size() - 1);
    LC_RETURN_IF_ERROR(Precheck(dir, options, Name(key)));
    // A folder that still holds files stays, as their prefix does on S3.
    if (::rmdir(PathOf(dir).c_str()) == 0 || errno == ENOENT || errno == ENOTEMPTY) {
      return Status::Ok();
    }
    return ErrnoStatus(errno, Name(key));
  }
  LC_RETURN_IF_ERROR(Precheck(key, options, Name(key)));
  if (::unlink(PathOf(key).c_str()) == 0) return Status::Ok();
  // A missing key, or a directory (which is no object), is already deleted as far as S3 goes.
  if (errno == ENOENT || errno == ENOTDIR || errno == EISDIR) return Status::Ok();
  return ErrnoStatus(errno, Name(key));
}

Result<ObjectInfo> LocalStore::Copy(std::string_view from_key, std::string_view to_key,
                                    const IoOptions& options) {
  LC_RETURN_IF_ERROR(Precheck(from_key, options, Name(from_key)));
  LC_RETURN_IF_ERROR(Precheck(to_key, options, Name(to_key)));
  LC_RETURN_IF_ERROR(Head(from_key, options).status());  // a file, not a folder
  LC_RETURN_IF_ERROR(MakeParents(root_, to_key, Name(to_key)));
  LC_ASSIGN_OR_RETURN(struct stat st,
                      WriteFileWhole(PathOf(to_key), Name(to_key), false, [&](int fd) {
                        return AppendFile(fd, PathOf(from_key), Name(from_key));
                      }));
  return InfoOf(std::string(to_key), st);
}

}  // namespace lakecache
