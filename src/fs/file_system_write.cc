// FileSystem's writes: create, write, close, fsync, mkdir, rmdir, unlink, rename, setattr.
#include <linux/fs.h>
#include <sys/stat.h>

#include <cerrno>
#include <ctime>

#include <spdlog/spdlog.h>

#include "fetch/block_fetch.h"
#include "fs/file_system.h"

namespace lakecache {
namespace {

std::string Where(const Namespace* ns, const std::string& path) { return ns->name + "/" + path; }

Status NeedsFlag(const Namespace* ns, const std::string& path, std::string_view what,
                 std::string_view flag) {
  return Status::Refused(EPERM, Where(ns, path) + ": " + std::string(what) + " needs namespaces." +
                                    ns->name + "." + std::string(flag) + ": true");
}

}  // namespace

void FileSystem::StartWrites() {
  if (!writable()) return;
  upload_pool_ = std::make_unique<ThreadPool>(options_.upload_threads);
  if (!options_.stage_dir.empty() && options_.stage_capacity > 0) {
    stage_allowance_ = std::make_unique<StageAllowance>(options_.stage_capacity);
  }
  upload_registry_ = std::make_unique<UploadRegistry>(options_.upload_registry);
  upload_registry_->AbortLeftovers([this](const std::string& name) {
    Namespace* ns = namespaces_->Find(name);
    return ns == nullptr ? nullptr : ns->store;
  });
}

bool FileSystem::Writable(const Namespace* ns) const {
  return ns != nullptr && !options_.read_only && ns->config.write;
}

bool FileSystem::writable() const {
  if (options_.read_only) return false;
  for (const std::string& name : namespaces_->names()) {
    if (namespaces_->Find(name)->config.write) return true;
  }
  return false;
}

Status FileSystem::CheckWritable(const Namespace* ns, const std::string& path) const {
  if (ns == nullptr) {
    // A mount with nothing to write says so as a read-only mount would.
    return Status::Refused(writable() ? EPERM : EROFS,
                           "the mount's root holds the namespaces; it cannot be changed");
  }
  if (Writable(ns)) return Status::Ok();
  if (options_.read_only)
    return Status::Refused(EROFS, Where(ns, path) + ": the mount is read-only");
  return Status::Refused(EROFS, Where(ns, path) + ": namespace '" + ns->name +
                                    "' is read-only (namespaces." + ns->name + ".write: false)");
}

Result<std::pair<Namespace*, std::string>> FileSystem::ChildPath(uint64_t parent,
                                                                 const std::string& name) {
  std::optional<InodeInfo> info = inodes_.Get(parent);
  if (!info) return Status::NotFound("stale inode " + std::to_string(parent));
  if (!info->is_dir) return Status::Refused(ENOTDIR, info->path + ": not a folder");
  if (name.empty() || name.size() > 1024 || name.find('/') != std::string::npos) {
    return Status::Refused(EINVAL, "invalid name '" + name + "'");
  }
  std::string path = JoinPath(info->path, name);
  LC_RETURN_IF_ERROR(CheckWritable(info->ns, path));
  return std::make_pair(info->ns, path);
}

std::shared_ptr<FileWriter> FileSystem::WriterOf(uint64_t ino) const {
  ReaderMutexLock lock(&handles_mu_);
  for (const auto& [fh, w] : writers_) {
    if (w->ino() == ino && !w->committed()) return w;
  }
  return nullptr;
}

std::shared_ptr<FileWriter> FileSystem::FindWriter(uint64_t fh) const {
  ReaderMutexLock lock(&handles_mu_);
  auto it = writers_.find(fh);
  return it == writers_.end() ? nullptr : it->second;
}

Result<OpenedFile> FileSystem::OpenWriter(Namespace* ns, const std::string& path, uint64_t ino,
                                          bool replaces, Caller caller) {
  std::string key = ns->meta->ObjectKey(path);
  auto upload =
      std::make_unique<ObjectUpload>(ns->store, ns->name, key, options_.upload, &write_budget_,
                                     upload_pool_.get(), upload_registry_.get(), &upload_counters_);
  std::unique_ptr<WriteStage> stage;
  if (stage_allowance_ != nullptr)
    stage = WriteStage::Open(options_.stage_dir, stage_allowance_.get());
  auto writer = std::make_shared<FileWriter>(ns, path, ino, ProcessOfThread(caller.pid), replaces,
                                             std::move(upload), std::move(stage));
  OpenedFile opened;
  opened.writing = true;
  {
    WriterMutexLock lock(&handles_mu_);
    opened.fh = next_fh_++;
    writers_.emplace(opened.fh, std::move(writer));
  }
  // The next server (after a crash) learns that this handle was being written: its bytes die
  // with this process, so it fails the handle's writes and close instead of taking it as unknown.
  if (options_.journal != nullptr) options_.journal->AddOpen({opened.fh, ino, kWritingMark, 0});
  return opened;
}

Status FileSystem::LostWriter(uint64_t fh) const {
  ReaderMutexLock lock(&handles_mu_);
  if (lost_writers_.count(fh) == 0) return Status::Ok();
  return Status::IoError("file handle " + std::to_string(fh) +
                         ": the mount's server restarted while the file was written; the bytes "
                         "written are lost and the file was not stored: write it again");
}

Result<OpenedFile> FileSystem::Open(uint64_t ino, int flags, Caller caller) {
  if (IsControl(ino)) return OpenControl(ino, flags, caller);
  std::optional<InodeInfo> info = inodes_.Get(ino);
  if (!info) return Status::NotFound("stale inode " + std::to_string(ino));
  if (info->is_dir || info->ns == nullptr) return Status::Refused(EISDIR, "is a folder");
  LC_ASSIGN_OR_RETURN(DirEntry entry, info->ns->meta->Stat(info->path));
  if (entry.is_dir) return Status::Refused(EISDIR, info->path + ": is a folder");
  int access = flags & O_ACCMODE;
  // O_RDONLY | O_TRUNC truncates where it may be written (the kernel passes O_TRUNC on); where
  // nothing may be written it is a change like any other, refused even of an empty object.
  if (access == O_RDONLY && (flags & O_TRUNC) != 0) {
    LC_RETURN_IF_ERROR(CheckWritable(info->ns, info->path));
  }
  if (access == O_RDONLY) return OpenForRead(ino, &*info, entry);
  // A file this mount is writing is no empty object: a second writer waits for its close, unless
  // the first was closed without a byte written (`touch f`, then `echo x > f` before the kernel
  // released the first handle): then this open takes the file over. If that release is committing
  // the empty file right now, YieldIfUnused waits for it, and this open replaces the empty object.
  if (std::shared_ptr<FileWriter> w = WriterOf(ino); w != nullptr) {
    if (access == O_RDWR && (flags & O_TRUNC) == 0) return OpenForRead(ino, &*info, entry);
    if (w->YieldIfUnused()) return OpenWriter(info->ns, info->path, ino, w->replaces(), caller);
    if (!w->committed() || w->size() > 0) {
      return Status::Refused(EBUSY, Where(info->ns, info->path) +
                                        ": being written through this mount; open it again once "
                                        "it is closed");
    }
  }
  // O_RDWR without O_TRUNC on an object with bytes: a read handle (tools open so to read).
  bool truncates = (flags & O_TRUNC) != 0 || entry.size == 0;
  if (access == O_RDWR && !truncates && Writable(info->ns)) return OpenForRead(ino, &*info, entry);
  LC_RETURN_IF_ERROR(CheckWritable(info->ns, info->path));
  if (!truncates) {
    return Status::Refused(EPERM, Where(info->ns, info->path) +
                                      ": an object is replaced whole, never changed in place or "
                                      "appended to: open it with O_TRUNC");
  }
  // Replacing an empty object loses nothing: no flag needed (touch, then a shell redirect).
  if (entry.size > 0 && !info->ns->config.allow_overwrite) {
    return NeedsFlag(info->ns, info->path, "replacing an object", "allow_overwrite");
  }
  return OpenWriter(info->ns, info->path, ino, true, caller);
}

Result<FileSystem::Created> FileSystem::Create(uint64_t parent, const std::string& name, int flags,
                                               Caller caller) {
  LC_ASSIGN_OR_RETURN(auto where, ChildPath(parent, name));
  auto [ns, path] = where;
  Result<DirEntry> existing = ns->meta->Stat(path);
  bool replaces = existing.ok();
  if (!existing.ok() && existing.status().code() != StatusCode::kNotFound) {
    return existing.status();
  }
  if (replaces) {
    if (existing->is_dir) return Status::Refused(EISDIR, Where(ns, path) + ": is a folder");
    if ((flags & O_EXCL) != 0) return Status::Refused(EEXIST, Where(ns, path) + ": exists");
    if (existing->size > 0 && !ns->config.allow_overwrite) {
      return NeedsFlag(ns, path, "replacing an object", "allow_overwrite");
    }
  }
  uint64_t ino = AcquireInode(ns, path, false);
  Result<OpenedFile> opened = OpenWriter(ns, path, ino, replaces, caller);
  if (!opened.ok()) Forget(ino, 1);  // the kernel is not answered with it
  LC_ASSIGN_OR_RETURN(OpenedFile file, std::move(opened));
  if (!replaces) {
    // Shown at once, empty, while written; the object appears in the store at close.
    ns->meta->NoteEntry(SplitParent(path).first, DirEntry{name, false, 0, "", std::time(nullptr)});
  }
  return Created{FileAttrOf(ino, ns, DirEntry{name, false, 0, "", std::time(nullptr)}), file};
}

Result<size_t> FileSystem::Write(uint64_t fh, uint64_t offset, std::span<const char> data,
                                 Caller caller) {
  std::shared_ptr<FileWriter> w = FindWriter(fh);
  if (w == nullptr) {
    if (std::optional<ControlHandle> c = FindControl(fh)) {
      if (c->writer == 0) return Status::Refused(EBADF, "the control file is open for reading");
      hints_->Write(c->writer, std::string_view(data.data(), data.size()));
      return data.size();
    }
    LC_RETURN_IF_ERROR(LostWriter(fh));
    if (FindHandle(fh) != nullptr) {
      return Status::Refused(EBADF, "file handle " + std::to_string(fh) +
                                        " is open for reading (opened O_RDWR without O_TRUNC)");
    }
    return Status::Refused(EBADF, "file handle " + std::to_string(fh) +
                                      " is not open for writing in this mount (opened before "
                                      "its server restarted?)");
  }
  return w->Write(offset, data, caller.pid);
}

Status FileSystem::Flush(uint64_t fh, Caller caller) {
  std::shared_ptr<FileWriter> w = FindWriter(fh);
  if (w == nullptr) return LostWriter(fh);
  pid_t tgid = ProcessOfThread(caller.pid);
  w->NoteClose(tgid);
  if (!w->CommitsOnClose(tgid)) return Status::Ok();
  return CommitWriter(*w);
}

Status FileSystem::Fsync(uint64_t fh) {
  std::shared_ptr<FileWriter> w = FindWriter(fh);
  if (w == nullptr) return LostWriter(fh);  // else a read handle: nothing to write
  Status s = w->Fsync();
  if (!s.ok()) spdlog::warn("{}: fsync failed: {}", Where(w->ns(), w->path()), s.ToString());
  return s;
}

Status FileSystem::CommitWriter(FileWriter& w) {
  Namespace* ns = w.ns();
  // Named, not structured bindings: a lambda below uses them.
  std::pair<std::string, std::string> parent = SplitParent(w.path());
  const std::string& dir = parent.first;
  const std::string& name = parent.second;
  std::string key = ns->meta->ObjectKey(w.path());
  Result<ObjectInfo> done = w.Commit([&](const ObjectInfo& info, const WriteStage* stage) {
    int64_t mtime = info.mtime != 0 ? info.mtime : std::time(nullptr);
    ns->meta->NoteEntry(dir, DirEntry{name, false, info.size, info.etag, mtime});
    if (stage != nullptr && !stage->dropped()) CacheWritten(ns, key, info, *stage);
  });
  if (done.ok()) return Status::Ok();
  // The old object (if any) is untouched; a new one never appeared.
  if (w.replaces()) {
    ns->meta->ExpireFolder(dir);
  } else {
    ns->meta->NoteRemoved(dir, name);
  }
  spdlog::warn("{}: not written to the store, the file is dropped: {}", Where(ns, w.path()),
               done.status().ToString());
  return done.status();
}

void FileSystem::CacheWritten(Namespace* ns, const std::string& key, const ObjectInfo& info,
                              const WriteStage& stage) {
  if (stage.size() != info.size || info.etag.empty()) return;
  uint64_t block_size = ns->config.block_size;
  ContentId content = MakeContentId(ns->name, key, info.etag, block_size);
  contents_.Note(ns->name, content, info.size, block_size);
  for (uint64_t index = 0; index * block_size < info.size; ++index) {
    BlockRequest req = MakeBlockRequest(content, key, info.etag, info.size, block_size, index);
    std::shared_ptr<Block> block = Block::Allocate(req.length);
    Result<size_t> n = stage.Read(req.offset, {block->mutable_data(), req.length});
    if (!n.ok() || *n != req.length) {
      spdlog::warn("{}: written blocks not cached: the stage did not read back", key);
      return;
    }
    blocks_->Admit(req, block);
  }
}

Result<FileAttr> FileSystem::SetAttr(uint64_t ino, std::optional<uint64_t> size, uint64_t fh) {
  if (IsControl(ino)) return ControlAttr(ino);  // O_TRUNC of the control file: nothing kept
  if (size.has_value()) {
    std::shared_ptr<FileWriter> w = fh != 0 ? FindWriter(fh) : nullptr;
    if (w == nullptr) w = WriterOf(ino);
    if (w != nullptr) {
      LC_RETURN_IF_ERROR(w->Truncate(*size));
    } else {
      LC_ASSIGN_OR_RETURN(FileAttr now, GetAttr(ino));
      if (now.size != *size) {
        std::optional<InodeInfo> info = inodes_.Get(ino);
        LC_RETURN_IF_ERROR(CheckWritable(info ? info->ns : nullptr, info ? info->path : ""));
        if (*size != 0) {
          return Status::Refused(EINVAL, Where(info->ns, info->path) +
                                             ": truncating an object to a length other than 0 "
                                             "is not supported");
        }
        if (!info->ns->config.allow_overwrite) {
          return NeedsFlag(info->ns, info->path, "truncating an object", "allow_overwrite");
        }
        LC_ASSIGN_OR_RETURN(ObjectInfo put,
                            info->ns->store->Put(info->ns->meta->ObjectKey(info->path), {}, {}));
        auto [dir, name] = SplitParent(info->path);
        info->ns->meta->NoteEntry(dir, DirEntry{name, false, 0, put.etag, std::time(nullptr)});
      }
    }
  }
  return GetAttr(ino);
}

Result<FileAttr> FileSystem::MakeDir(uint64_t parent, const std::string& name) {
  LC_ASSIGN_OR_RETURN(auto where, ChildPath(parent, name));
  auto [ns, path] = where;
  Result<DirEntry> existing = ns->meta->Stat(path);
  if (existing.ok()) return Status::Refused(EEXIST, Where(ns, path) + ": exists");
  if (existing.status().code() != StatusCode::kNotFound) return existing.status();
  // A folder is its marker object "path/", as other S3 tools make them: it lasts, and shows to
  // every other mount.
  LC_RETURN_IF_ERROR(ns->store->Put(ns->meta->ObjectKey(path) + "/", {}, {}).status());
  ns->meta->NoteEntry(SplitParent(path).first, DirEntry{name, true, 0, "", 0});
  ns->meta->NoteFolderMade(path);
  return DirAttr(AcquireInode(ns, path, true), ns);
}

Status FileSystem::RemoveDir(uint64_t parent, const std::string& name) {
  LC_ASSIGN_OR_RETURN(auto where, ChildPath(parent, name));
  auto [ns, path] = where;
  LC_ASSIGN_OR_RETURN(DirEntry entry, ns->meta->Stat(path));
  if (!entry.is_dir) return Status::Refused(ENOTDIR, Where(ns, path) + ": not a folder");
  // Asked of the store, not the cache: a folder is removed only if nothing at all is in it.
  std::string marker = ns->meta->ObjectKey(path) + "/";
  ListRequest request;
  request.prefix = marker;
  request.max_keys = 2;
  LC_ASSIGN_OR_RETURN(ListPage page,
                      ns->store->List(request, IoOptions::WithTimeout(std::chrono::seconds(60))));
  for (const ObjectInfo& o : page.objects) {
    if (o.key != marker) return Status::Refused(ENOTEMPTY, Where(ns, path) + ": not empty");
  }
  LC_RETURN_IF_ERROR(ns->store->Delete(marker, IoOptions::WithTimeout(std::chrono::seconds(60))));
  ns->meta->NoteRemoved(SplitParent(path).first, name);
  ns->meta->ExpireFolder(path);
  return Status::Ok();
}

Status FileSystem::Unlink(uint64_t parent, const std::string& name) {
  LC_ASSIGN_OR_RETURN(auto where, ChildPath(parent, name));
  auto [ns, path] = where;
  LC_ASSIGN_OR_RETURN(DirEntry entry, ns->meta->Stat(path));
  if (entry.is_dir) return Status::Refused(EISDIR, Where(ns, path) + ": is a folder");
  if (!ns->config.allow_delete) return NeedsFlag(ns, path, "removing an object", "allow_delete");
  LC_RETURN_IF_ERROR(ns->store->Delete(ns->meta->ObjectKey(path),
                                       IoOptions::WithTimeout(std::chrono::seconds(60))));
  ns->meta->NoteRemoved(SplitParent(path).first, name);
  return Status::Ok();
}

Status FileSystem::Rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                          const std::string& new_name, unsigned flags) {
  if ((flags & RENAME_EXCHANGE) != 0) {
    return Status::Refused(EINVAL, "RENAME_EXCHANGE is not supported: objects cannot be swapped");
  }
  LC_ASSIGN_OR_RETURN(auto from, ChildPath(parent, name));
  LC_ASSIGN_OR_RETURN(auto to, ChildPath(new_parent, new_name));
  auto [ns, path] = from;
  auto [to_ns, to_path] = to;
  if (ns != to_ns) {
    return Status::Refused(EXDEV, Where(ns, path) + ": a rename across namespaces is a copy");
  }
  LC_ASSIGN_OR_RETURN(DirEntry entry, ns->meta->Stat(path));
  if (entry.is_dir) {
    return Status::Refused(EXDEV, Where(ns, path) +
                                      ": folders are not renamed (one copy per object); the "
                                      "caller copies them (mv does)");
  }
  if (!ns->config.allow_delete) {
    return NeedsFlag(ns, path, "a rename (it removes the source object)", "allow_delete");
  }
  // A file being written has no object yet: a copy would find none, or move the one it replaces.
  if (WriterOf(inodes_.NumberOf(ns, path)) != nullptr) {
    return Status::NotFound(Where(ns, path) + ": being written; its object is made at its close");
  }
  Result<DirEntry> target = ns->meta->Stat(to_path);
  if (!target.ok() && target.status().code() != StatusCode::kNotFound) return target.status();
  if (target.ok()) {
    if (target->is_dir) return Status::Refused(EISDIR, Where(ns, to_path) + ": is a folder");
    if ((flags & RENAME_NOREPLACE) != 0) {
      return Status::Refused(EEXIST, Where(ns, to_path) + ": exists");
    }
    if (target->size > 0 && !ns->config.allow_overwrite) {
      return NeedsFlag(ns, to_path, "a rename onto an object", "allow_overwrite");
    }
  }
  auto io = IoOptions::WithTimeout(std::chrono::minutes(10));
  LC_ASSIGN_OR_RETURN(ObjectInfo copied,
                      ns->store->Copy(ns->meta->ObjectKey(path), ns->meta->ObjectKey(to_path), io));
  auto [to_dir, to_leaf] = SplitParent(to_path);
  int64_t mtime = copied.mtime != 0 ? copied.mtime : std::time(nullptr);
  // A copy's reply names its version, not always its size: the source's.
  ns->meta->NoteEntry(to_dir, DirEntry{to_leaf, false, entry.size, copied.etag, mtime});
  Status removed = ns->store->Delete(ns->meta->ObjectKey(path), io);
  if (!removed.ok()) {
    spdlog::warn("{}: renamed by a copy to {}, but the source was not removed: {}", Where(ns, path),
                 to_path, removed.ToString());
    return removed;
  }
  ns->meta->NoteRemoved(SplitParent(path).first, name);
  // The kernel's inode of the source names the target now: so does ours.
  if (uint64_t ino = inodes_.Move(ns, path, to_path); ino != 0 && options_.journal != nullptr) {
    options_.journal->AddInode({ino, false, ns->name, to_path});
  }
  return Status::Ok();
}

}  // namespace lakecache
