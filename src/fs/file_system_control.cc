// The mount's control folder: `<mountpoint>/.lakecache/prefetch`, where readers announce the order
// in which they will open files (fs/order_hints.h). Any user may write it (mode 0666): a
// training pod reaches it through the same host path as the data, as whatever user it runs.
#include <sys/stat.h>

#include <fcntl.h>
#include <cerrno>

#include "fetch/block_fetch.h"
#include "fs/file_system.h"
#include "fs/file_writer.h"

namespace lakecache {

// What the hints fetch through: this file system's namespaces and BlockStore (or, in cluster
// mode, the workers).
class FileSystem::HintFiles : public HintTarget {
 public:
  explicit HintFiles(FileSystem* fs) : fs_(fs) {}

  Result<HintedFile> Resolve(const std::string& path) override {
    Namespace* ns = nullptr;
    std::string in_ns = path;
    if (fs_->options_.single_namespace_root) {
      ns = fs_->namespaces_->Find(fs_->namespaces_->names()[0]);
    } else {
      size_t slash = path.find('/');
      if (slash == std::string::npos) return Status::NotFound(path + ": not a file");
      ns = fs_->namespaces_->Find(path.substr(0, slash));
      if (ns == nullptr) return Status::NotFound(path + ": no such namespace");
      in_ns = path.substr(slash + 1);
    }
    LC_ASSIGN_OR_RETURN(DirEntry entry, ns->meta->Stat(in_ns));
    if (entry.is_dir) return Status::NotFound(path + ": a folder");
    HintedFile f;
    f.ns = ns;
    f.object_key = ns->meta->ObjectKey(in_ns);
    f.etag = entry.etag;
    f.size = entry.size;
    f.block_size = ns->config.block_size;
    f.content = MakeContentId(ns->name, f.object_key, f.etag, f.block_size);
    return f;
  }

  uint64_t Fetch(const HintedFile& f, uint64_t first, uint64_t limit) override {
    if (fs_->options_.remote_prefetch) return fs_->options_.remote_prefetch(f, first, limit);
    uint64_t end = std::min(f.blocks(), first + limit);
    // Blocks in memory are read from it when their turn comes (a warm epoch). Blocks only on disk
    // (an epoch after a load) are loaded into staging ahead, many at once: read when their turn
    // comes, each would cost its reader a disk read that nothing overlaps.
    auto held = [&](uint64_t index) { return fs_->blocks_->InMemory(BlockKey{f.content, index}); };
    for (uint64_t index = first; index < end;) {
      if (held(index)) {
        ++index;
        continue;
      }
      uint64_t run_end = index + 1;
      while (run_end < end && !held(run_end)) ++run_end;
      uint64_t stopped = fs_->PrefetchBlocks(f.ns->store.get(), f.content, f.object_key, f.etag,
                                             f.size, f.block_size, index, run_end);
      if (stopped < run_end) return stopped - first;
      index = run_end;
    }
    return end - first;
  }

  void Drop(const HintedFile& f) override {
    if (fs_->options_.remote_prefetch) return;  // in the workers' caches, which manage them
    for (uint64_t index = 0; index < f.HeadBlocks(fs_->options_.order_hint.head); ++index) {
      fs_->blocks_->DropStaged(BlockKey{f.content, index});
    }
  }

 private:
  FileSystem* const fs_;
};

void FileSystem::StartHints() {
  if (options_.order_hint.window == 0) return;
  // Standalone, hinted files are prefetched into staging on the read-ahead pool.
  if (!options_.remote_prefetch && prefetch_pool_ == nullptr) return;
  hint_files_ = std::make_unique<HintFiles>(this);
  hints_ = std::make_unique<OrderHints>(hint_files_.get(), options_.order_hint);
}

std::string FileSystem::MountPath(const Namespace* ns, const std::string& path) const {
  return options_.single_namespace_root ? path : ns->name + "/" + path;
}

Result<FileAttr> FileSystem::ControlAttr(uint64_t ino) const {
  if (!HasControl() || !IsControl(ino)) {
    return Status::NotFound("stale inode " + std::to_string(ino));
  }
  FileAttr a;
  a.ino = ino;
  if (ino >= kNativeBase) {
    if (options_.native_socket.empty())
      return Status::NotFound("stale inode " + std::to_string(ino));
    a.mode = S_IFREG | 0444;
    a.size = options_.native_socket.size() + 1;
  } else {
    a.is_dir = (ino - kControlBase) % 2 == 0;
    if (!a.is_dir && hints_ == nullptr)
      return Status::NotFound("stale inode " + std::to_string(ino));
    a.mode = a.is_dir ? S_IFDIR | 0555 : S_IFREG | 0666;
  }
  a.mtime = mount_time_;
  a.uid = options_.uid;
  a.gid = options_.gid;
  return a;
}

Result<FileAttr> FileSystem::LookupControl(uint64_t parent, const std::string& name) const {
  if (IsControl(parent)) {
    LC_ASSIGN_OR_RETURN(FileAttr dir, ControlAttr(parent));
    if (!dir.is_dir) return Status::InvalidArgument("not a folder");
    if (name == kPrefetchFile && hints_ != nullptr) return ControlAttr(parent + 1);
    if (name == kNativeFile && !options_.native_socket.empty()) {
      return ControlAttr(NativeFileOf((parent - kControlBase) / 2));
    }
    return Status::NotFound(std::string(kControlDir) + "/" + name + ": no such control file");
  }
  // The mount's root and each namespace's root have one.
  std::optional<InodeInfo> info = inodes_.Get(parent);
  if (!info || !info->is_dir || !info->path.empty()) return Status::NotFound(name);
  return ControlAttr(ControlDirOf(parent));
}

Result<OpenedFile> FileSystem::OpenControl(uint64_t ino, int flags, Caller caller) {
  LC_ASSIGN_OR_RETURN(FileAttr attr, ControlAttr(ino));
  if (attr.is_dir) return Status::Refused(EISDIR, "is a folder");
  ControlHandle control;
  if (ino >= kNativeBase) {
    if ((flags & O_ACCMODE) != O_RDONLY) return Status::Refused(EACCES, "read-only");
    control.text = options_.native_socket + "\n";
  } else if ((flags & O_ACCMODE) == O_RDONLY) {
    control.text = hints_->Describe();
  } else {
    // Paths are relative to the folder that holds the control folder.
    std::optional<InodeInfo> folder = inodes_.Get((ino - kControlBase) / 2);
    if (!folder) return Status::NotFound("stale inode " + std::to_string(ino));
    std::string prefix =
        folder->ns == nullptr || options_.single_namespace_root ? "" : folder->ns->name + "/";
    control.writer = hints_->BeginWrite(caller.pid > 0 ? ProcessOfThread(caller.pid) : 0,
                                        (flags & O_APPEND) != 0, std::move(prefix));
  }
  OpenedFile opened;
  opened.writing = true;  // its bytes bypass the page cache: a read sees the status of now
  WriterMutexLock lock(&handles_mu_);
  opened.fh = next_fh_++;
  controls_.emplace(opened.fh, std::move(control));
  return opened;
}

std::optional<FileSystem::ControlHandle> FileSystem::FindControl(uint64_t fh) const {
  ReaderMutexLock lock(&handles_mu_);
  auto it = controls_.find(fh);
  if (it == controls_.end()) return std::nullopt;
  return it->second;
}

}  // namespace lakecache
