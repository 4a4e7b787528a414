#include "fs/file_system.h"

#include "fetch/block_fetch.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <limits>

#include <spdlog/spdlog.h>

#include "fs/read_ahead.h"

namespace lakecache {
namespace {

constexpr double kImmutableTimeout = 86400.0;
// Blocks of one read-ahead run fetched with one GET: 8 × 4 MiB, where object stores reach their
// per-stream speed (s3rver here: ~300 MB/s with 4 MiB GETs, ~700 MB/s with 32 MiB ones).

std::string Join(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : dir + "/" + name;
}

// The request for block `index` of an object version. Into `req`, whose strings keep their
// capacity: a thread's reads reuse it and allocate nothing.

}  // namespace

// An open file: one version of one object, pinned at open.
struct FileSystem::Handle {
  Handle(uint64_t inode, Namespace* n, std::string key, std::string tag, uint64_t bytes,
         uint64_t block, const ReadAheadOptions& read_ahead_options)
      : ino(inode),
        ns(n),
        object_key(std::move(key)),
        etag(std::move(tag)),
        size(bytes),
        block_size(block),
        content(MakeContentId(n->name, object_key, etag, block)),
        read_ahead(read_ahead_options) {}

  uint64_t ino;
  Namespace* ns;
  std::string object_key;
  std::string etag;
  uint64_t size;
  uint64_t block_size;
  ContentId content;
  // The block this handle read last: later reads of it are not counted again by the eviction
  // policies, which want one access per block per reading stream.
  std::atomic<uint64_t> last_block{UINT64_MAX};
  Mutex read_ahead_mu;
  ReadAheadWindow read_ahead GUARDED_BY(read_ahead_mu);
  // The memory block this handle read last, kept so that its further reads (a 4 MiB block is read
  // in 1 MiB requests) never fetch it again even if the tiers declined or evicted it. Its bytes
  // count against the memory budget.
  Mutex pin_mu;
  BlockRef pinned GUARDED_BY(pin_mu);
  uint64_t pinned_index GUARDED_BY(pin_mu) = UINT64_MAX;
  int pinned_tier GUARDED_BY(pin_mu) = -1;  // the tier it came from (its reads are its hits)
  std::atomic<bool> saw_change{false};      // the store sent another version (warned once)
  std::atomic<bool> superseded{false};      // this mount opened another version since: no reads
};

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

uint64_t FileSystem::AssignInode(Namespace* ns, const std::string& path, bool is_dir) {
  bool changed = false;
  uint64_t ino = inodes_.Assign(ns, path, is_dir, &changed);
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

uint32_t FileSystem::ModeOf(uint64_t ino, std::optional<uint32_t> set, uint32_t read_only) const {
  if (set.has_value()) return *set;
  std::optional<InodeInfo> info = inodes_.Get(ino);
  return info && Writable(info->ns) ? read_only | 0200 : read_only;
}

FileAttr FileSystem::DirAttr(uint64_t ino) const {
  FileAttr a;
  a.ino = ino;
  a.is_dir = true;
  a.mode = S_IFDIR | ModeOf(ino, options_.dir_mode, 0555);
  a.mtime = mount_time_;  // folders have no time of their own in an object store
  a.uid = options_.uid;
  a.gid = options_.gid;
  return a;
}

FileAttr FileSystem::FileAttrOf(uint64_t ino, const DirEntry& entry) const {
  if (entry.is_dir) return DirAttr(ino);
  FileAttr a;
  a.ino = ino;
  a.size = entry.size;
  a.mtime = entry.mtime;
  a.mode = S_IFREG | ModeOf(ino, options_.file_mode, 0444);
  a.uid = options_.uid;
  a.gid = options_.gid;
  return a;
}

Result<FileAttr> FileSystem::Resolve(const InodeInfo& parent, const std::string& name) {
  if (parent.ns == nullptr) {  // the multi-namespace root: its entries are the namespaces
    Namespace* ns = namespaces_->Find(name);
    if (ns == nullptr) return Status::NotFound("no namespace named '" + name + "'");
    return DirAttr(AssignInode(ns, "", true));
  }
  std::string path = Join(parent.path, name);
  LC_ASSIGN_OR_RETURN(DirEntry entry, parent.ns->meta->Stat(path));
  return FileAttrOf(AssignInode(parent.ns, path, entry.is_dir), entry);
}

Result<FileAttr> FileSystem::Lookup(uint64_t parent, const std::string& name) {
  if (HasControl() && (name == kControlDir || IsControl(parent))) {
    Result<FileAttr> control = LookupControl(parent, name);
    if (control.ok() || IsControl(parent)) return control;
  }
  std::optional<InodeInfo> info = inodes_.Get(parent);
  if (!info) return Status::NotFound("stale inode " + std::to_string(parent));
  if (!info->is_dir) return Status::InvalidArgument("not a folder");
  return Resolve(*info, name);
}

Result<FileAttr> FileSystem::GetAttr(uint64_t ino) {
  if (IsControl(ino)) return ControlAttr(ino);
  std::optional<InodeInfo> info = inodes_.Get(ino);
  if (!info) return Status::NotFound("stale inode " + std::to_string(ino));
  if (info->ns == nullptr || info->path.empty()) return DirAttr(ino);
  // A file being written shows the size written so far.
  if (std::shared_ptr<FileWriter> w = WriterOf(ino)) {
    return FileAttrOf(ino, DirEntry{"", false, w->size(), "", std::time(nullptr)});
  }
  LC_ASSIGN_OR_RETURN(DirEntry entry, info->ns->meta->Stat(info->path));
  if (entry.is_dir != info->is_dir) {
    return Status::NotFound(info->path + ": replaced by a " + (entry.is_dir ? "folder" : "file"));
  }
  return FileAttrOf(ino, entry);
}

Result<std::vector<DirItem>> FileSystem::ListRoot() {
  std::vector<DirItem> items;
  for (const std::string& name : namespaces_->names()) {
    items.push_back({name, DirAttr(AssignInode(namespaces_->Find(name), "", true))});
  }
  return items;
}

Result<std::vector<DirItem>> FileSystem::ReadDir(uint64_t ino) {
  if (IsControl(ino)) {
    LC_ASSIGN_OR_RETURN(FileAttr dir, ControlAttr(ino));
    if (!dir.is_dir) return Status::InvalidArgument("not a folder");
    LC_ASSIGN_OR_RETURN(FileAttr file, ControlAttr(ino + 1));
    return std::vector<DirItem>{{kPrefetchFile, file}};
  }
  std::optional<InodeInfo> info = inodes_.Get(ino);
  if (!info) return Status::NotFound("stale inode " + std::to_string(ino));
  if (!info->is_dir) return Status::InvalidArgument("not a folder");
  if (info->ns == nullptr) return ListRoot();
  LC_ASSIGN_OR_RETURN(std::shared_ptr<const DirListing> listing, info->ns->meta->List(info->path));
  if (!info->path.empty() && !listing->exists()) {
    return Status::NotFound(info->ns->name + "/" + info->path + ": folder no longer exists");
  }
  std::vector<DirItem> items;
  items.reserve(listing->entries().size());
  for (const DirEntry& e : listing->entries()) {
    uint64_t child = AssignInode(info->ns, Join(info->path, e.name), e.is_dir);
    items.push_back({e.name, FileAttrOf(child, e)});
  }
  return items;
}

Result<OpenedFile> FileSystem::OpenForRead(uint64_t ino, const InodeInfo* info,
                                           const DirEntry& entry) {
  const NamespaceConfig& nsc = info->ns->config;
  std::string key = info->ns->meta->ObjectKey(info->path);
  ReadAheadOptions read_ahead;
  read_ahead.block_size = nsc.block_size;
  read_ahead.file_size = entry.size;
  read_ahead.max_window = prefetch_pool_ ? options_.read_ahead_max : 0;
  if (hints_ != nullptr) hints_->Opened(MountPath(info->ns, info->path));
  auto* h = new Handle(ino, info->ns, key, entry.etag, entry.size, nsc.block_size, read_ahead);
  contents_.Note(info->ns->name, h->content, entry.size, nsc.block_size);
  OpenedFile opened;
  {
    WriterMutexLock lock(&handles_mu_);
    opened.fh = next_fh_++;
    handles_.emplace(opened.fh, std::unique_ptr<Handle>(h));
  }
  if (options_.journal != nullptr) {
    options_.journal->AddOpen({opened.fh, ino, entry.etag, entry.size});
  }
  // While this mount writes the file, its pages hold the new bytes: none are kept.
  bool writing = WriterOf(ino) != nullptr;
  {
    MutexLock lock(&etag_mu_);
    std::string& last = opened_etag_[ino];
    opened.keep_cache = last == entry.etag && !writing;
    last = writing ? "" : entry.etag;
  }
  // The kernel drops the file's page cache at this open: the handles of another version read
  // nothing from now on, or their bytes would fill it again for this version's readers. Marked
  // before the open is answered, so before the kernel drops anything.
  if (!opened.keep_cache) {
    ReaderMutexLock lock(&handles_mu_);
    for (const auto& [fh, other] : handles_) {
      if (other->ino == ino && other->etag != entry.etag) {
        other->superseded.store(true, std::memory_order_release);
      }
    }
  }
  return opened;
}

Result<size_t> FileSystem::ReadBlock(Handle& h, uint64_t index, uint64_t offset_in_block,
                                     std::span<char> dst) {
  auto copy = [&](const Block& block) {
    if (offset_in_block >= block.size()) return size_t{0};
    size_t n = std::min<uint64_t>(dst.size(), block.size() - offset_in_block);
    std::memcpy(dst.data(), block.data() + offset_in_block, n);
    return n;
  };
  {
    MutexLock lock(&h.pin_mu);
    if (h.pinned_index == index) {
      size_t n = copy(*h.pinned);
      blocks_->CountHitBytes(h.pinned_tier, n);
      return n;
    }
  }
  thread_local BlockRequest req;
  FillBlockRequest(h.content, h.object_key, h.etag, h.size, h.block_size, index, &req);
  req.repeat_access = h.last_block.exchange(index, std::memory_order_relaxed) == index;
  if (ReadRangeOnly(h, req.key)) return ReadRange(h, index * h.block_size + offset_in_block, dst);
  ObjectStore& store = *h.ns->store;
  LC_ASSIGN_OR_RETURN(
      BlockStore::PinnedRead read,
      blocks_->ReadPinned(req, offset_in_block, dst,
                          [&store](const BlockRequest& r) { return FetchBlock(store, r); }));
  if (read.block == nullptr) return read.copied;
  // A view of a worker's shared memory is held only while read: kept, it would hold the worker's
  // memory.
  if (!read.block->foreign()) Pin(h, index, read.block, read.tier);
  return copy(*read.block);
}

void FileSystem::ReadAhead(Handle& h, uint64_t offset, uint64_t length) {
  if (prefetch_pool_ == nullptr) return;
  ReadAheadWindow::Blocks blocks;
  {
    MutexLock lock(&h.read_ahead_mu);
    blocks = h.read_ahead.OnRead(offset, length);
  }
  if (blocks.empty()) return;
  uint64_t stopped = PrefetchBlocks(h.ns->store.get(), h.content, h.object_key, h.etag, h.size,
                                    h.block_size, blocks.first, blocks.end);
  if (stopped < blocks.end) {
    MutexLock lock(&h.read_ahead_mu);
    h.read_ahead.Unissued(stopped);  // the window shrinks to what the budget holds
  }
}

uint64_t FileSystem::PrefetchBlocks(ObjectStore* store, const ContentId& content,
                                    const std::string& key, const std::string& etag, uint64_t size,
                                    uint64_t block_size, uint64_t first, uint64_t end) {
  // Consecutive blocks that start fetching go out as one ranged GET of up to max_run_blocks.
  auto run = std::make_shared<BlockRunFetch>(store);
  uint64_t run_blocks = 0;
  auto finish_run = [&] {
    run->Seal();
    run = std::make_shared<BlockRunFetch>(store);
    run_blocks = 0;
  };
  uint64_t index = first;
  for (; index < end; ++index) {
    BlockRequest req = MakeBlockRequest(content, key, etag, size, block_size, index);
    if (run_blocks >= options_.max_run_blocks) finish_run();
    BlockSource source = [run](const BlockRequest& r) { return run->Get(r); };
    BlockStore::PrefetchResult started = blocks_->Prefetch(req, source, *prefetch_pool_);
    if (started == BlockStore::PrefetchResult::kStarted) {
      run->Add(req);
      ++run_blocks;
      continue;
    }
    finish_run();  // a gap: what follows cannot share this run's range
    if (started == BlockStore::PrefetchResult::kNoBudget) break;
  }
  run->Seal();
  return index;
}

FileSystem::Handle* FileSystem::FindHandle(uint64_t fh) const {
  ReaderMutexLock lock(&handles_mu_);
  auto it = handles_.find(fh);
  return it == handles_.end() ? nullptr : it->second.get();
}

Status FileSystem::UnknownHandle(uint64_t fh) {
  return Status::InvalidArgument("file handle " + std::to_string(fh) +
                                 " is not open in this mount (opened before it restarted?)");
}

Status FileSystem::CheckNotSuperseded(Handle& h) {
  if (!h.superseded.load(std::memory_order_acquire)) return Status::Ok();
  // The kernel keeps one page cache per file: once an open of the new version dropped it, the
  // old version's bytes read now would land there and be read by the new version's readers.
  Status changed = Status::PreconditionFailed(
      h.object_key + ": a newer version (not ETag " + h.etag +
      ") was opened in this mount since this file was: open it again to read the new version");
  NoteReadError(h, changed);
  return changed;
}

Result<size_t> FileSystem::Read(uint64_t fh, uint64_t offset, std::span<char> dst) {
  Handle* found = FindHandle(fh);
  if (found == nullptr) {
    if (std::shared_ptr<FileWriter> w = FindWriter(fh)) return w->Read(offset, dst);
    if (std::optional<ControlHandle> c = FindControl(fh)) {
      if (offset >= c->text.size()) return size_t{0};
      size_t n = std::min<size_t>(dst.size(), c->text.size() - offset);
      std::memcpy(dst.data(), c->text.data() + offset, n);
      return n;
    }
    return UnknownHandle(fh);
  }
  Handle& h = *found;
  if (offset >= h.size || dst.empty()) return size_t{0};
  LC_RETURN_IF_ERROR(CheckNotSuperseded(h));
  ReadAhead(h, offset, std::min<uint64_t>(dst.size(), h.size - offset));
  Result<size_t> n = ReadBlocks(h, offset, dst);
  if (!n.ok()) NoteReadError(h, n.status());
  if (n.ok()) bytes_read_.fetch_add(*n, std::memory_order_relaxed);
  return n;
}

Result<std::span<const char>> FileSystem::ReadPinned(uint64_t fh, uint64_t offset,
                                                     std::span<char> scratch, BlockRef* pin) {
  Handle* found = FindHandle(fh);
  if (found == nullptr) {
    if (std::shared_ptr<FileWriter> w = FindWriter(fh)) {
      LC_ASSIGN_OR_RETURN(size_t n, w->Read(offset, scratch));
      return std::span<const char>(scratch.data(), n);
    }
    if (FindControl(fh)) {
      LC_ASSIGN_OR_RETURN(size_t n, Read(fh, offset, scratch));
      return std::span<const char>(scratch.data(), n);
    }
    return UnknownHandle(fh);
  }
  Handle& h = *found;
  LC_RETURN_IF_ERROR(CheckNotSuperseded(h));
  Result<std::span<const char>> out = ReadPinnedSpan(h, offset, scratch, pin);
  if (!out.ok()) NoteReadError(h, out.status());
  if (out.ok()) bytes_read_.fetch_add(out->size(), std::memory_order_relaxed);
  return out;
}

void FileSystem::NoteReadError(Handle& h, const Status& error) {
  if (error.code() != StatusCode::kPreconditionFailed) return;
  // The object is no longer the version this handle reads: its folder is listed again, so that a
  // fresh open reads the new version; this handle keeps failing on blocks not cached.
  const std::string& prefix = h.ns->meta->prefix();
  if (h.object_key.starts_with(prefix)) {
    h.ns->meta->ExpireFolder(SplitParent(h.object_key.substr(prefix.size())).first);
  }
  if (!h.saw_change.exchange(true)) {
    spdlog::warn(
        "{}: changed while open (ETag {} when opened): reads of blocks not cached fail "
        "with EIO; open the file again to read the new version: {}",
        h.object_key, h.etag, error.ToString());
  }
}

Result<std::span<const char>> FileSystem::ReadPinnedSpan(Handle& h, uint64_t offset,
                                                         std::span<char> scratch, BlockRef* pin) {
  if (offset >= h.size || scratch.empty()) return std::span<const char>();
  uint64_t want = std::min<uint64_t>(scratch.size(), h.size - offset);
  ReadAhead(h, offset, want);
  uint64_t index = offset / h.block_size;
  if ((offset + want - 1) / h.block_size != index) {  // spans blocks: copy
    LC_ASSIGN_OR_RETURN(size_t n, ReadBlocks(h, offset, scratch));
    return std::span<const char>(scratch.data(), n);
  }
  uint64_t in_block = offset - index * h.block_size;
  {
    MutexLock lock(&h.pin_mu);
    if (h.pinned_index == index) {
      *pin = h.pinned;
      blocks_->CountHitBytes(h.pinned_tier, want);
      return std::span<const char>((*pin)->data() + in_block, want);
    }
  }
  thread_local BlockRequest req;
  FillBlockRequest(h.content, h.object_key, h.etag, h.size, h.block_size, index, &req);
  req.repeat_access = h.last_block.exchange(index, std::memory_order_relaxed) == index;
  if (ReadRangeOnly(h, req.key)) {
    LC_ASSIGN_OR_RETURN(size_t n, ReadRange(h, offset, scratch.first(want)));
    if (n != want) {
      return Status::Internal(h.object_key + ": a read at " + std::to_string(offset) + " gave " +
                              std::to_string(n) + " bytes, expected " + std::to_string(want));
    }
    return std::span<const char>(scratch.data(), n);
  }
  ObjectStore& store = *h.ns->store;
  LC_ASSIGN_OR_RETURN(
      BlockStore::PinnedRead read,
      blocks_->ReadPinned(req, in_block, scratch.first(want),
                          [&store](const BlockRequest& r) { return FetchBlock(store, r); }));
  std::span<const char> out(scratch.data(), read.copied);
  if (read.block != nullptr) {
    uint64_t n = in_block >= read.block->size() ? 0 : read.block->size() - in_block;
    out = std::span<const char>(read.block->data() + in_block, std::min(n, want));
    if (out.size() == want && !read.block->foreign()) Pin(h, index, read.block, read.tier);
    *pin = std::move(read.block);
  }
  if (out.size() != want) {
    return Status::Internal(h.object_key + ": block " + std::to_string(index) + " gave " +
                            std::to_string(out.size()) + " bytes, expected " +
                            std::to_string(want));
  }
  return out;
}

bool FileSystem::ReadRangeOnly(Handle& h, const BlockKey& key) {
  if (!options_.range_reads_when_random) return false;
  {
    MutexLock lock(&h.read_ahead_mu);
    if (h.read_ahead.sequential()) return false;
  }
  if (blocks_->Contains(key)) return false;
  // A block of a worker on this host: fetched whole into the node's cache (the worker's memory,
  // read here in place), never into this mount's.
  if (blocks_->Shadowed(key)) return false;
  // Fetched whole only when this mount keeps it: a block that would evict another (the mount's
  // cache is full, as with a random reader over more data than it holds) is read by range; the
  // workers cache it.
  if (!blocks_->HasRoomInMemory(h.block_size)) return true;
  // Second touch: a block a random reader comes back to is worth caching whole here.
  uint64_t hash = StableKeyHash(key) | 1;
  std::atomic<uint64_t>& seen = range_read_[hash % kRangeReadSlots];
  return seen.exchange(hash, std::memory_order_relaxed) != hash;
}

Result<size_t> FileSystem::ReadRange(Handle& h, uint64_t offset, std::span<char> dst) {
  ReadOptions options;
  options.if_match = h.etag;
  options.object_size = h.size;
  return h.ns->store->Read(h.object_key, offset, dst, options);
}

void FileSystem::Pin(Handle& h, uint64_t index, const BlockRef& block, int tier) {
  blocks_->budget().ForceAcquire(block->size());
  BlockRef old;  // freed outside the lock
  {
    MutexLock lock(&h.pin_mu);
    old = std::move(h.pinned);
    h.pinned = block;
    h.pinned_index = index;
    h.pinned_tier = tier;
  }
  if (old != nullptr) blocks_->budget().Release(old->size());
}

Result<size_t> FileSystem::ReadBlocks(Handle& h, uint64_t offset, std::span<char> dst) {
  uint64_t end = std::min<uint64_t>(h.size, offset + dst.size());
  size_t done = 0;
  for (uint64_t pos = offset; pos < end;) {
    uint64_t index = pos / h.block_size;
    uint64_t in_block = pos - index * h.block_size;
    uint64_t want = std::min<uint64_t>(end - pos, h.block_size - in_block);
    LC_ASSIGN_OR_RETURN(size_t n, ReadBlock(h, index, in_block, dst.subspan(done, want)));
    if (n != want) {
      return Status::Internal(h.object_key + ": block " + std::to_string(index) + " gave " +
                              std::to_string(n) + " bytes, expected " + std::to_string(want));
    }
    done += n;
    pos += n;
  }
  return done;
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
  if (options_.journal != nullptr) options_.journal->AddRelease(fh);
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
  LC_ASSIGN_OR_RETURN(std::vector<DirItem> items, ReadDir(ino));
  auto listed = std::make_shared<const std::vector<DirItem>>(std::move(items));
  WriterMutexLock lock(&handles_mu_);
  uint64_t fh = next_fh_++;
  dirs_.emplace(fh, std::move(listed));
  return fh;
}

Result<std::shared_ptr<const std::vector<DirItem>>> FileSystem::DirItems(uint64_t fh,
                                                                         uint64_t ino) {
  {
    ReaderMutexLock lock(&handles_mu_);
    if (auto it = dirs_.find(fh); it != dirs_.end()) return it->second;
  }
  LC_ASSIGN_OR_RETURN(std::vector<DirItem> items, ReadDir(ino));
  auto listed = std::make_shared<const std::vector<DirItem>>(std::move(items));
  WriterMutexLock lock(&handles_mu_);
  auto [it, added] = dirs_.emplace(fh, std::move(listed));
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
