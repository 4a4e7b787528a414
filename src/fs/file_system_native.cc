// What the native data path (native/native_server.h) asks of the file system: files opened for a
// reader that is not the kernel, with the kernel's permission check done here.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <string>

#include "fs/file_handle.h"
#include "fs/file_system.h"

namespace lakecache {
namespace {

// The kernel's check of mode bits (default_permissions): owner, then group, then others; root
// reads and searches anything (CAP_DAC_OVERRIDE).
bool Permits(const FileAttr& a, const FileSystem::Reader& r, uint32_t want) {
  if (r.uid == 0) return true;
  uint32_t bits = a.mode & 07;
  if (r.uid == a.uid) {
    bits = (a.mode >> 6) & 07;
  } else if (r.gid == a.gid ||
             std::find(r.groups.begin(), r.groups.end(), a.gid) != r.groups.end()) {
    bits = (a.mode >> 3) & 07;
  }
  return (bits & want) == want;
}

}  // namespace

Result<FileAttr> FileSystem::ResolveForReader(std::string_view path, const Reader& reader,
                                              InodeInfo* info) {
  LC_ASSIGN_OR_RETURN(FileAttr at, GetAttr(InodeTable::kRootIno));
  std::optional<InodeInfo> root = inodes_.Get(InodeTable::kRootIno);
  if (!root) return Status::NotFound("the mount's root");
  InodeInfo cur = *root;
  std::string walked;
  size_t pos = 0;
  while (pos < path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string_view::npos) slash = path.size();
    std::string name(path.substr(pos, slash - pos));
    pos = slash + 1;
    if (name.empty() || name == ".") continue;
    if (!at.is_dir) return Status::Refused(ENOTDIR, walked + ": not a folder");
    if (!Permits(at, reader, 1)) {
      return Status::Refused(EACCES, (walked.empty() ? "/" : walked) + ": permission denied");
    }
    if (name == "..") return Status::Refused(EINVAL, std::string(path) + ": '..' is not allowed");
    walked += walked.empty() ? name : "/" + name;
    // By path, holding nothing: no kernel lookup to be forgotten comes of it.
    InodeInfo next;
    LC_ASSIGN_OR_RETURN(at, Resolve(cur, name, /*held_parent=*/0, &next));
    cur = std::move(next);
  }
  if (at.is_dir) return Status::Refused(EISDIR, std::string(path) + ": is a folder");
  if (!Permits(at, reader, 4)) return Status::Refused(EACCES, walked + ": permission denied");
  if (info != nullptr) *info = std::move(cur);
  return at;
}

Result<OpenedFile> FileSystem::OpenNativePath(std::string_view path, const Reader& reader) {
  InodeInfo info;
  LC_ASSIGN_OR_RETURN(FileAttr at, ResolveForReader(path, reader, &info));
  if (info.ns == nullptr) return Status::Refused(EISDIR, "is a folder");
  LC_ASSIGN_OR_RETURN(DirEntry entry, info.ns->meta->Stat(info.path));
  if (entry.is_dir) return Status::Refused(EISDIR, info.path + ": is a folder");
  return OpenForRead(at.ino, &info, entry, /*native=*/true);
}

Result<FileAttr> FileSystem::CheckReadable(uint64_t ino, const Reader& reader) {
  LC_ASSIGN_OR_RETURN(FileAttr at, GetAttr(ino));
  if (at.is_dir) return Status::Refused(EISDIR, "is a folder");
  if (!Permits(at, reader, 4)) return Status::Refused(EACCES, "permission denied");
  return at;
}

Result<OpenedFile> FileSystem::OpenNative(uint64_t ino) {
  if (IsControl(ino)) return Status::Refused(EINVAL, "a control file");
  std::optional<InodeInfo> info = inodes_.Get(ino);
  if (!info) return Status::NotFound("stale inode " + std::to_string(ino));
  if (info->is_dir || info->ns == nullptr) return Status::Refused(EISDIR, "is a folder");
  LC_ASSIGN_OR_RETURN(DirEntry entry, info->ns->meta->Stat(info->path));
  if (entry.is_dir) return Status::Refused(EISDIR, info->path + ": is a folder");
  return OpenForRead(ino, &*info, entry, /*native=*/true);
}

Result<FileSystem::HandleShape> FileSystem::ShapeOf(uint64_t fh) const {
  Handle* h = FindHandle(fh);
  if (h == nullptr) return UnknownHandle(fh);
  return HandleShape{h->size, h->block_size, std::hash<std::string>{}(h->etag)};
}

bool FileSystem::ReadableByAll(const Reader& reader) const {
  if (reader.uid == 0 || reader.uid == options_.uid) return true;
  uint32_t files = options_.file_mode.value_or(0444);
  uint32_t dirs = options_.dir_mode.value_or(0555);
  return (files & 04) != 0 && (dirs & 01) != 0;
}

std::optional<BlockKey> FileSystem::BlockKeyAt(uint64_t fh, uint64_t offset) const {
  Handle* h = FindHandle(fh);
  if (h == nullptr || h->block_size == 0) return std::nullopt;
  return BlockKey{h->content, offset / h->block_size};
}

std::unique_ptr<ReaderHolds> FileSystem::NewReaderHolds() { return blocks_->NewReaderHolds(); }

bool FileSystem::InMemoryAt(uint64_t fh, uint64_t offset) const {
  Handle* h = FindHandle(fh);
  if (h == nullptr || offset >= h->size) return false;
  uint64_t index = offset / h->block_size;
  {
    MutexLock lock(&h->pin_mu);
    if (h->pinned_index == index) return true;
  }
  return blocks_->InMemory(BlockKey{h->content, index});
}

}  // namespace lakecache
