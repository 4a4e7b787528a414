#include "fs/file_system.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <limits>

#include "fetch/block_fetch.h"
#include "fs/file_handle.h"
#include "fs/read_ahead.h"

namespace lakecache {
namespace {

constexpr double kImmutableTimeout = 86400.0;

}  // namespace

FileSystem::FileSystem(std::unique_ptr<NamespaceTable> namespaces,
                       std::shared_ptr<BlockStore> blocks, FileSystemOptions options)
    : namespaces_(std::move(namespaces)),
      blocks_(std::move(blocks)),
      options_(options),
      mount_time_(std::time(nullptr)),
      inodes_(InodeInfo{
          options.single_namespace_root ? namespaces_->Find(namespaces_->names()[0]) : nullptr, "",
          true}),
      write_budget_(options.write_budget) {
  if (options_.prefetch_threads > 0 &&
      (options_.read_ahead_max > 0 || options_.order_hint.window > 0)) {
    prefetch_pool_ = std::make_unique<ThreadPool>(options_.prefetch_threads);
  }
  StartHints();
  if (options_.journal != nullptr) RestoreFromJournal();
  StartWrites();
}

uint64_t FileSystem::AcquireInode(Namespace* ns, const std::string& path, bool is_dir,
                                  uint64_t parent) {
  bool changed = false;
  uint64_t ino = parent != 0 ? inodes_.AcquireChild(parent, ns, path, is_dir, &changed)
                             : inodes_.Acquire(ns, path, is_dir, &changed);
  if (changed && options_.journal != nullptr) {
    options_.journal->AddInode({ino, is_dir, ns == nullptr ? "" : ns->name, path});
  }
  return ino;
}

void FileSystem::RestoreFromJournal() {
  MountJournal& journal = *options_.journal;
  for (const MountJournal::Inode& i : journal.inodes()) {
    Namespace* ns = i.ns.empty() ? nullptr : namespaces_->Find(i.ns);
    if (ns == nullptr && !i.ns.empty()) continue;  // a namespace this config no longer has
    inodes_.Restore(i.ino, ns, i.path, i.is_dir);
  }
  size_t files = 0;
  WriterMutexLock lock(&handles_mu_);
  next_fh_ = std::max(next_fh_, journal.max_fh() + 1);
  for (const MountJournal::OpenFile& f : journal.open_files()) {
    if (f.etag == kWritingMark) {
      lost_writers_.insert(f.fh);  // its bytes died with the previous server
      continue;
    }
    std::optional<InodeInfo> info = inodes_.Get(f.ino);
    if (!info || info->ns == nullptr || info->is_dir) continue;
    const NamespaceConfig& nsc = info->ns->config;
    ReadAheadOptions read_ahead;
    read_ahead.block_size = nsc.block_size;
    read_ahead.file_size = f.size;
    read_ahead.max_window = prefetch_pool_ ? options_.read_ahead_max : 0;
    // The version it was opened at: the reader goes on reading the same bytes.
    handles_.emplace(
        f.fh, std::make_unique<Handle>(f.ino, info->ns, info->ns->meta->ObjectKey(info->path),
                                       f.etag, f.size, nsc.block_size, read_ahead));
    ++files;
  }
  spdlog::info("restored {} inodes and {} open files of the previous server",
               journal.inodes().size(), files);
}

FileSystem::~FileSystem() {
  // Files still being written (a server stopped under its writers) are aborted while the pool
  // and the registry they use still exist.
  std::unordered_map<uint64_t, std::shared_ptr<FileWriter>> writers;
  {
    WriterMutexLock lock(&handles_mu_);
    writers.swap(writers_);
  }
  writers.clear();
}

uint32_t FileSystem::ModeOf(const Namespace* ns, std::optional<uint32_t> set,
                            uint32_t read_only) const {
  if (set.has_value()) return *set;
  return ns != nullptr && Writable(ns) ? read_only | 0200 : read_only;
}

FileAttr FileSystem::DirAttr(uint64_t ino, const Namespace* ns) const {
  FileAttr a;
  a.ino = ino;
  a.is_dir = true;
  a.mode = S_IFDIR | ModeOf(ns, options_.dir_mode, 0555);
  a.mtime = mount_time_;  // folders have no time of their own in an object store
  a.uid = options_.uid;
  a.gid = options_.gid;
  return a;
}

FileAttr FileSystem::FileAttrOf(uint64_t ino, const Namespace* ns, const DirEntry& entry) const {
  return FileAttrOf(ino, ns, entry.is_dir, entry.size, entry.mtime);
}

FileAttr FileSystem::FileAttrOf(uint64_t ino, const Namespace* ns, bool is_dir, uint64_t size,
                                int64_t mtime) const {
  if (is_dir) return DirAttr(ino, ns);
  FileAttr a;
  a.ino = ino;
  a.size = size;
  a.mtime = mtime;
  a.mode = S_IFREG | ModeOf(ns, options_.file_mode, 0444);
  a.uid = options_.uid;
  a.gid = options_.gid;
  return a;
}

Result<FileAttr> FileSystem::Resolve(const InodeInfo& parent, const std::string& name,
                                     uint64_t held_parent, InodeInfo* child) {
  auto number = [&](Namespace* ns, const std::string& path, bool is_dir) {
    if (child != nullptr) *child = InodeInfo{ns, path, is_dir};
    return held_parent != 0 ? AcquireInode(ns, path, is_dir, held_parent)
                            : inodes_.NumberOf(ns, path);
  };
  if (parent.ns == nullptr) {  // the multi-namespace root: its entries are the namespaces
    Namespace* ns = namespaces_->Find(name);
    if (ns == nullptr) return Status::NotFound("no namespace named '" + name + "'");
    return DirAttr(number(ns, "", true), ns);
  }
  std::string path = JoinPath(parent.path, name);
  LC_ASSIGN_OR_RETURN(DirEntry entry, parent.ns->meta->Stat(path));
  return FileAttrOf(number(parent.ns, path, entry.is_dir), parent.ns, entry);
}

void FileSystem::Forget(uint64_t ino, uint64_t count) {
  if (inodes_.Forget(ino, count) && options_.journal != nullptr) options_.journal->AddForget(ino);
}

Result<FileAttr> FileSystem::Lookup(uint64_t parent, const std::string& name) {
  if (HasControl() && (name == kControlDir || IsControl(parent))) {
    Result<FileAttr> control = LookupControl(parent, name);
    if (control.ok() || IsControl(parent)) return control;
  }
  std::optional<InodeInfo> info = inodes_.Get(parent);
  if (!info) return Status::NotFound("stale inode " + std::to_string(parent));
  if (!info->is_dir) return Status::InvalidArgument("not a folder");
  return Resolve(*info, name, parent);
}

Result<FileAttr> FileSystem::GetAttr(uint64_t ino) {
  if (IsControl(ino)) return ControlAttr(ino);
  std::optional<InodeInfo> info = inodes_.Get(ino);
  if (!info) return Status::NotFound("stale inode " + std::to_string(ino));
  if (info->ns == nullptr || info->path.empty()) return DirAttr(ino, info->ns);
  // A file being written shows the size written so far.
  if (std::shared_ptr<FileWriter> w = WriterOf(ino)) {
    return FileAttrOf(ino, info->ns, DirEntry{"", false, w->size(), "", std::time(nullptr)});
  }
  LC_ASSIGN_OR_RETURN(DirEntry entry, info->ns->meta->Stat(info->path));
  if (entry.is_dir != info->is_dir) {
    return Status::NotFound(info->path + ": replaced by a " + (entry.is_dir ? "folder" : "file"));
  }
  return FileAttrOf(ino, info->ns, entry);
}

Result<std::vector<DirItem>> FileSystem::ListRoot() {
  std::vector<DirItem> items;
  for (const std::string& name : namespaces_->names()) {
    Namespace* ns = namespaces_->Find(name);
    items.push_back({name, DirAttr(inodes_.NumberOf(ns, ""), ns)});
  }
  return items;
}

size_t OpenFolder::size() const {
  if (stream != nullptr) return stream->size();
  return listing != nullptr ? listing->size() : fixed.size();
}

Result<std::shared_ptr<const OpenFolder>> FileSystem::ListFolder(uint64_t ino,
                                                                 const FolderHook& on_stream) {
  auto folder = std::make_shared<OpenFolder>();
  if (IsControl(ino)) {
    LC_ASSIGN_OR_RETURN(FileAttr dir, ControlAttr(ino));
    if (!dir.is_dir) return Status::InvalidArgument("not a folder");
    if (Result<FileAttr> file = ControlAttr(ino + 1); file.ok())
      folder->fixed.push_back({kPrefetchFile, *file});
    Result<FileAttr> native = ControlAttr(NativeFileOf((ino - kControlBase) / 2));
    if (native.ok()) folder->fixed.push_back({kNativeFile, *native});
    return std::shared_ptr<const OpenFolder>(std::move(folder));
  }
  std::optional<InodeInfo> info = inodes_.Get(ino);
  if (!info) return Status::NotFound("stale inode " + std::to_string(ino));
  if (!info->is_dir) return Status::InvalidArgument("not a folder");
  if (info->ns == nullptr) {
    LC_ASSIGN_OR_RETURN(folder->fixed, ListRoot());
    return std::shared_ptr<const OpenFolder>(std::move(folder));
  }
  MetadataCache::StreamHook pages;
  if (on_stream) {
    pages = [&](std::shared_ptr<const ListingStream> stream) {
      auto streamed = std::make_shared<OpenFolder>();
      streamed->ns = info->ns;
      streamed->path = info->path;
      streamed->stream = std::move(stream);
      on_stream(std::move(streamed));
    };
  }
  LC_ASSIGN_OR_RETURN(folder->listing, info->ns->meta->List(info->path, pages));
  if (!info->path.empty() && !folder->listing->exists()) {
    return Status::NotFound(info->ns->name + "/" + info->path + ": folder no longer exists");
  }
  folder->ns = info->ns;
  folder->path = std::move(info->path);
  return std::shared_ptr<const OpenFolder>(std::move(folder));
}

DirItem FileSystem::ItemOf(const OpenFolder& folder, size_t i) const {
  const DirListing* page = folder.listing.get();
  if (folder.stream != nullptr) {  // i < folder.size(): it came
    std::optional<ListingStream::Entry> entry = folder.stream->Wait(i);
    page = entry->page.get();
    i = entry->index;
  }
  if (page == nullptr) return folder.fixed[i];
  DirEntry e = page->at(i);
  uint64_t child = inodes_.NumberOf(folder.ns, JoinPath(folder.path, e.name));
  FileAttr attr = FileAttrOf(child, folder.ns, e);
  return DirItem{std::move(e.name), attr};
}

Result<FileSystem::ListedItem> FileSystem::Listed(uint64_t dir, const OpenFolder& folder, size_t i,
                                                  bool acquire, std::string* scratch) {
  if (folder.listing == nullptr && folder.stream == nullptr) {  // the root, or a control folder
    const DirItem& item = folder.fixed[i];
    ListedItem out{item.name, item.attr};
    if (acquire && !IsControl(item.attr.ino)) {  // a namespace: control inodes are never held
      Namespace* ns = namespaces_->Find(item.name);
      if (ns == nullptr) return Status::NotFound("no namespace named '" + item.name + "'");
      out.attr.ino = AcquireInode(ns, "", true);
    }
    return out;
  }
  const DirListing* page = folder.listing.get();
  if (folder.stream != nullptr) {  // entry i of the pages that came (the stream keeps them)
    std::optional<ListingStream::Entry> entry = folder.stream->Wait(i);
    if (!entry) return Status::NotFound("past the folder's last entry");
    page = entry->page.get();
    i = entry->index;
  }
  const DirListing& listing = *page;
  std::string& path = *scratch;
  std::string_view name = listing.name_at(i);
  path.assign(folder.path);
  if (!path.empty()) path.push_back('/');
  path.append(name);
  const bool is_dir = listing.is_dir_at(i);
  const uint64_t ino = acquire ? AcquireInode(folder.ns, path, is_dir, dir)
                               : inodes_.NumberOfChild(dir, folder.ns, path);
  return ListedItem{name,
                    FileAttrOf(ino, folder.ns, is_dir, listing.size_at(i), listing.mtime_at(i))};
}

Result<std::vector<DirItem>> FileSystem::ReadDir(uint64_t ino) {
  LC_ASSIGN_OR_RETURN(std::shared_ptr<const OpenFolder> folder, ListFolder(ino));
  std::vector<DirItem> items;
  items.reserve(folder->size());
  for (size_t i = 0; i < folder->size(); ++i) items.push_back(ItemOf(*folder, i));
  return items;
}

void FileSystem::Release(uint64_t fh) {
  // The kernel sends no read of a handle once it releases it: nothing else holds it now.
  std::unique_ptr<Handle> owned;
  std::shared_ptr<FileWriter> writer;
  bool lost = false;
  {
    WriterMutexLock lock(&handles_mu_);
    if (auto c = controls_.find(fh); c != controls_.end()) {
      if (c->second.writer != 0) hints_->EndWrite(c->second.writer);
      controls_.erase(c);
      return;
    }
    if (auto w = writers_.find(fh); w != writers_.end()) writer = w->second;
    lost = lost_writers_.count(fh) != 0;
  }
  if (writer != nullptr) {
    // The last close: what no close committed (nothing written, or closed by another process
    // than the opener) is committed now; a file another open took over is not this handle's.
    if (!writer->yielded()) (void)CommitWriter(*writer);
    WriterMutexLock lock(&handles_mu_);
    writers_.erase(fh);
  }
  if (writer != nullptr || lost) {
    if (options_.journal != nullptr) options_.journal->AddRelease(fh);
    WriterMutexLock lock(&handles_mu_);
    lost_writers_.erase(fh);
    return;
  }
  {
    WriterMutexLock lock(&handles_mu_);
    auto it = handles_.find(fh);
    if (it == handles_.end()) return;  // not opened here (before a restart): nothing to free
    owned = std::move(it->second);
    handles_.erase(it);
  }
  if (options_.journal != nullptr && !owned->native) options_.journal->AddRelease(fh);
  Handle* h = owned.get();
  ReadAheadWindow::Blocks offered;
  {
    MutexLock lock(&h->read_ahead_mu);
    offered = h->read_ahead.Offered();
  }
  // Read-ahead still staged will not be read through this handle: give its memory back now rather
  // than when it expires. (Blocks that were read have left staging already.)
  for (uint64_t index = offered.first; index < offered.end; ++index) {
    blocks_->DropStaged(BlockKey{h->content, index});
  }
  BlockRef pinned;
  {
    MutexLock lock(&h->pin_mu);
    pinned = std::move(h->pinned);
  }
  if (pinned != nullptr) blocks_->budget().Release(pinned->size());
}

Result<uint64_t> FileSystem::OpenDir(uint64_t ino) {
  LC_ASSIGN_OR_RETURN(std::shared_ptr<const OpenFolder> folder, ListFolder(ino));
  return KeepDir(std::move(folder));
}

void FileSystem::OpenDir(uint64_t ino, const std::function<void(Result<uint64_t>)>& opened) {
  bool handed = false;
  Result<std::shared_ptr<const OpenFolder>> folder =
      ListFolder(ino, [&](std::shared_ptr<const OpenFolder> streamed) {
        handed = true;
        opened(KeepDir(std::move(streamed)));
      });
  if (handed) return;  // a listing that failed since ends its stream so
  if (!folder.ok()) return opened(folder.status());
  opened(KeepDir(std::move(*folder)));
}

uint64_t FileSystem::KeepDir(std::shared_ptr<const OpenFolder> folder) {
  WriterMutexLock lock(&handles_mu_);
  uint64_t fh = next_fh_++;
  dirs_.emplace(fh, std::move(folder));
  return fh;
}

Status FileSystem::WaitForEntry(const OpenFolder& folder, size_t i) const {
  if (folder.stream == nullptr || folder.stream->Wait(i)) return Status::Ok();
  return folder.stream->status();
}

Result<std::shared_ptr<const OpenFolder>> FileSystem::DirItems(uint64_t fh, uint64_t ino) {
  {
    ReaderMutexLock lock(&handles_mu_);
    if (auto it = dirs_.find(fh); it != dirs_.end()) return it->second;
  }
  LC_ASSIGN_OR_RETURN(std::shared_ptr<const OpenFolder> folder, ListFolder(ino));
  WriterMutexLock lock(&handles_mu_);
  auto [it, added] = dirs_.emplace(fh, std::move(folder));
  return it->second;
}

void FileSystem::ReleaseDir(uint64_t fh) {
  WriterMutexLock lock(&handles_mu_);
  dirs_.erase(fh);
}

double FileSystem::AttrTimeoutSeconds(uint64_t ino) const {
  auto seconds = [](const NamespaceConfig& c) {
    return c.immutable ? kImmutableTimeout : std::chrono::duration<double>(c.metadata_ttl).count();
  };
  std::optional<InodeInfo> info = inodes_.Get(ino);
  if (info && info->ns != nullptr) return seconds(info->ns->config);
  double shortest = kImmutableTimeout;
  for (const std::string& name : namespaces_->names()) {
    shortest = std::min(shortest, seconds(namespaces_->Find(name)->config));
  }
  return shortest;
}

}  // namespace lakecache
