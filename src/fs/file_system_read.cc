// The read path of FileSystem: opening a file for reading, its reads (pinned or copied, by block or
// by range), read-ahead and the prefetches it starts.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "fetch/block_fetch.h"
#include "fs/file_handle.h"
#include "fs/file_system.h"
#include "fs/read_ahead.h"

namespace lakecache {

Result<OpenedFile> FileSystem::OpenForRead(uint64_t ino, const InodeInfo* info,
                                           const DirEntry& entry, bool native) {
  const NamespaceConfig& nsc = info->ns->config;
  std::string key = info->ns->meta->ObjectKey(info->path);
  ReadAheadOptions read_ahead;
  read_ahead.block_size = nsc.block_size;
  read_ahead.file_size = entry.size;
  read_ahead.max_window = prefetch_pool_ ? options_.read_ahead_max : 0;
  if (hints_ != nullptr) hints_->Opened(MountPath(info->ns, info->path));
  auto* h = new Handle(ino, info->ns, key, entry.etag, entry.size, nsc.block_size, read_ahead);
  h->native = native;
  contents_.Note(info->ns->name, h->content, entry.size, nsc.block_size);
  OpenedFile opened;
  {
    WriterMutexLock lock(&handles_mu_);
    opened.fh = next_fh_++;
    handles_.emplace(opened.fh, std::unique_ptr<Handle>(h));
  }
  if (native) return opened;  // the kernel knows nothing of it
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
  LC_ASSIGN_OR_RETURN(BlockStore::PinnedRead read,
                      blocks_->ReadPinned(req, offset_in_block, dst,
                                          [&store, blocks = blocks_.get()](const BlockRequest& r) {
                                            return FetchBlock(store, r, blocks->Allocator());
                                          }));
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
  auto run = std::make_shared<BlockRunFetch>(store, blocks_->Allocator());
  uint64_t run_blocks = 0;
  auto finish_run = [&] {
    run->Seal();
    run = std::make_shared<BlockRunFetch>(store, blocks_->Allocator());
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
  LC_ASSIGN_OR_RETURN(BlockStore::PinnedRead read,
                      blocks_->ReadPinned(req, in_block, scratch.first(want),
                                          [&store, blocks = blocks_.get()](const BlockRequest& r) {
                                            return FetchBlock(store, r, blocks->Allocator());
                                          }));
  std::span<const char> out(scratch.data(), read.copied);
  if (read.block != nullptr) {
    uint64_t n = in_block >= read.block->size() ? 0 : read.block->size() - in_block;
    out = std::span<const char>(read.block->data() + in_block, std::min(n, want));
    // A native handle keeps none: a reader's session may hold thousands of files.
    if (out.size() == want && !read.block->foreign() && !h.native) {
      Pin(h, index, read.block, read.tier);
    }
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
  // Second touch: a block a random reader comes back to is worth caching whole here. A block read
  // by range is noted in two slots (from different bits of its hash), so that it is forgotten
  // only when other blocks took both, not when one other block's slot happens to be its own.
  uint64_t hash = StableKeyHash(key) | 1;
  std::atomic<uint64_t>& first = range_read_[hash % kRangeReadSlots];
  std::atomic<uint64_t>& second = range_read_[(hash >> 32) % kRangeReadSlots];
  bool seen = first.exchange(hash, std::memory_order_relaxed) == hash;
  seen |= second.exchange(hash, std::memory_order_relaxed) == hash;
  return !seen;
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

}  // namespace lakecache
