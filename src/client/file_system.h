// FileSystem: the read-only file system a mount shows, testable without FUSE.
//
// Namespaces are top-level folders (or, in the quick form, the one namespace is the root). Folders
// and attributes come from each namespace's MetadataCache; file bytes from the BlockStore, whose
// misses become ranged GETs of the object version (ETag) seen at open. A file opened twice with the
// same ETag may keep the kernel page cache (keep_cache); a changed ETag drops it. Each handle keeps
// a ReadAheadWindow: sequential readers get blocks prefetched on a pool of this class (parallel
// ranged GETs, off the caller's thread) into the BlockStore's staging area, within its memory
// budget. Bytes are cached only under the version they came from: a store reply of another
// version fails the read (kPreconditionFailed, EIO to the reader) and relists the file's folder,
// so the next open reads the new version. Thread-safe: FUSE calls every method from many threads.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cache/block_store.h"
#include "cache/content_index.h"
#include "client/inode_table.h"
#include "client/mount_journal.h"
#include "common/mutex.h"
#include "common/result.h"
#include "common/thread_pool.h"
#include "meta/namespace_table.h"

namespace lakecache {

struct FileSystemOptions {
  uid_t uid = 0;
  gid_t gid = 0;
  uint32_t file_mode = 0444;
  uint32_t dir_mode = 0555;
  // Quick form: the single namespace is the mount's root instead of a top-level folder.
  bool single_namespace_root = false;
  uint64_t read_ahead_max = 64ull << 20;  // per stream; less than a block: no read-ahead
  uint32_t prefetch_threads = 16;
  // Consecutive prefetched blocks fetched with one read of the store (one ranged GET). Cluster
  // mode sets 1: each block has its own owner worker.
  uint32_t max_run_blocks = 8;
  // Cluster mode: a block a random reader misses for the first time is not fetched whole into this
  // mount's cache; only the range read comes from its worker (which caches the whole block), so a
  // 128 KiB pread moves 128 KiB, not a block. A block read again (a small table of recently
  // range-read blocks remembers it) is fetched whole if the mount's memory cache has room for it
  // (no eviction), else read by range again; a block a worker on this host owns goes through the
  // node's cache; sequential readers take whole blocks.
  bool range_reads_when_random = false;
  // Where the inode numbers and open files go, for the next server of the same FUSE connection
  // (client/mount_journal.h); what it holds is restored first. Null: kept in memory only.
  std::shared_ptr<MountJournal> journal;
};

struct FileAttr {
  uint64_t ino = 0;
  bool is_dir = false;
  uint64_t size = 0;
  int64_t mtime = 0;
  uint32_t mode = 0;  // type and permission bits
  uid_t uid = 0;
  gid_t gid = 0;
};

struct DirItem {
  std::string name;
  FileAttr attr;
};

struct OpenedFile {
  uint64_t fh = 0;
  bool keep_cache = false;  // the kernel may keep pages cached from an earlier open
};

class FileSystem {
 public:
  FileSystem(std::unique_ptr<NamespaceTable> namespaces, std::shared_ptr<BlockStore> blocks,
             FileSystemOptions options);
  ~FileSystem();

  Result<FileAttr> Lookup(uint64_t parent, const std::string& name);
  Result<FileAttr> GetAttr(uint64_t ino);
  Result<std::vector<DirItem>> ReadDir(uint64_t ino);
  Result<OpenedFile> Open(uint64_t ino);
  // Reads up to dst.size() bytes at `offset`; short only at the end of the file.
  Result<size_t> Read(uint64_t fh, uint64_t offset, std::span<char> dst);
  // Like Read, without the copy where it can: when the range lies in one block held in memory, the
  // result points into that block and *pin holds it (keep it until the bytes are used); otherwise
  // the bytes are copied into `scratch` and the result points there.
  Result<std::span<const char>> ReadPinned(uint64_t fh, uint64_t offset, std::span<char> scratch,
                                           BlockRef* pin);
  void Release(uint64_t fh);

  // A folder's entries, listed once at opendir and served from the handle by offset.
  Result<uint64_t> OpenDir(uint64_t ino);
  // The entries of the open folder `fh`; a handle not open here (kept by the kernel from before a
  // restart of the mount's server) is listed again from `ino` and kept under the same number.
  Result<std::shared_ptr<const std::vector<DirItem>>> DirItems(uint64_t fh, uint64_t ino);
  void ReleaseDir(uint64_t fh);

  // How long the kernel may cache an entry or attributes of `ino`: its namespace's metadata TTL
  // (a day for immutable namespaces; the shortest TTL for the multi-namespace root).
  double AttrTimeoutSeconds(uint64_t ino) const;

  BlockStore& blocks() { return *blocks_; }
  const NamespaceTable& namespaces() const { return *namespaces_; }
  // The object versions opened so far, by namespace (for `lakecache report`).
  ContentIndex& contents() { return contents_; }

 private:
  struct Handle;
  // The open file `fh` names (a number, never a pointer: a handle the kernel kept from before a
  // restart of the mount's server must not be taken for memory); null when it is not open here.
  Handle* FindHandle(uint64_t fh) const EXCLUDES(handles_mu_);
  static Status UnknownHandle(uint64_t fh);
  // inodes_.Assign, journaling what changed.
  uint64_t AssignInode(Namespace* ns, const std::string& path, bool is_dir);
  // The previous server's inodes and open files (options_.journal).
  void RestoreFromJournal();
  Result<FileAttr> Resolve(const InodeInfo& parent, const std::string& name);
  Result<std::vector<DirItem>> ListRoot();
  FileAttr DirAttr(uint64_t ino) const;
  FileAttr FileAttrOf(uint64_t ino, const DirEntry& entry) const;
  Result<size_t> ReadBlock(Handle& h, uint64_t index, uint64_t offset_in_block,
                           std::span<char> dst);
  Result<size_t> ReadBlocks(Handle& h, uint64_t offset, std::span<char> dst);
  Result<std::span<const char>> ReadPinnedSpan(Handle& h, uint64_t offset, std::span<char> scratch,
                                               BlockRef* pin);
  // After a failed read: an object that changed under `h` gets its folder listed again.
  void NoteReadError(Handle& h, const Status& error);
  // Tells the handle's window of a read and starts the prefetches it asks for.
  void ReadAhead(Handle& h, uint64_t offset, uint64_t length);
  // True when a read of block `key` should be a range read of the store (see
  // FileSystemOptions::range_reads_when_random).
  bool ReadRangeOnly(Handle& h, const BlockKey& key);
  Result<size_t> ReadRange(Handle& h, uint64_t offset, std::span<char> dst);
  // Keeps `block` as the handle's current block (see Handle::pinned).
  void Pin(Handle& h, uint64_t index, const BlockRef& block);

  std::unique_ptr<NamespaceTable> namespaces_;
  std::shared_ptr<BlockStore> blocks_;
  const FileSystemOptions options_;
  const int64_t mount_time_;
  InodeTable inodes_;
  ContentIndex contents_;
  static constexpr size_t kRangeReadSlots = 4096;
  // Hashes of blocks read by range (see ReadRangeOnly); direct-mapped, lossy.
  std::unique_ptr<std::atomic<uint64_t>[]> range_read_ =
      std::make_unique<std::atomic<uint64_t>[]>(kRangeReadSlots);
  mutable SharedMutex handles_mu_;
  std::unordered_map<uint64_t, std::unique_ptr<Handle>> handles_ GUARDED_BY(handles_mu_);
  std::unordered_map<uint64_t, std::shared_ptr<const std::vector<DirItem>>> dirs_
      GUARDED_BY(handles_mu_);
  uint64_t next_fh_ GUARDED_BY(handles_mu_) = 1;  // files and folders share the numbers
  Mutex etag_mu_;
  std::unordered_map<uint64_t, std::string> opened_etag_ GUARDED_BY(etag_mu_);
  // Last member: destroyed first, finishing prefetches while the stores and blocks still exist.
  std::unique_ptr<ThreadPool> prefetch_pool_;  // null without read-ahead
};

}  // namespace lakecache
