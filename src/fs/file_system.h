// FileSystem: the file system a mount shows, testable without FUSE.
//
// Namespaces are top-level folders (or, in the quick form, the one namespace is the root). Folders
// and attributes come from each namespace's MetadataCache; file bytes from the BlockStore, whose
// misses become ranged GETs of the object version (ETag) seen at open. A file opened twice with the
// same ETag may keep the kernel page cache (keep_cache); a changed ETag drops it. Each handle keeps
// a ReadAheadWindow: sequential readers get blocks prefetched on a pool of this class (parallel
// ranged GETs, off the caller's thread) into the BlockStore's staging area, within its memory
// budget. Bytes are cached only under the version they came from: a store reply of another
// version fails the read (kPreconditionFailed, EIO to the reader) and relists the file's folder,
// so the next open reads the new version.
//
// Writes (docs/semantics.md, "Writes"): a namespace that writes lets the mount create objects,
// written in order and streamed to the store (ObjectUpload) within a WriteBudget, committed at
// close and shown at once in this mount's listings; its flags allow overwrites and deletes.
// Written bytes are staged beside the disk tier and enter the cache under the new version at
// commit. Thread-safe: FUSE calls every method from many threads.
//
// Its parts, one file each: names, attributes, folders and handles (file_system.cc); the read
// path (file_system_read.cc, on FileSystem::Handle of file_handle.h); the write path
// (file_system_write.cc); the control folder (file_system_control.cc).
#pragma once

#include <fcntl.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "cache/block_store.h"
#include "cache/content_index.h"
#include "common/mutex.h"
#include "common/result.h"
#include "common/thread_pool.h"
#include "common/write_budget.h"
#include "fs/file_writer.h"
#include "fs/inode_table.h"
#include "fs/mount_journal.h"
#include "fs/object_upload.h"
#include "fs/order_hints.h"
#include "fs/upload_registry.h"
#include "fs/write_stage.h"
#include "meta/namespace_table.h"

namespace lakecache {

struct FileSystemOptions {
  uid_t uid = 0;
  gid_t gid = 0;
  // Permission bits; unset (nullopt): 0444 and 0555, with the owner's write bit where the
  // namespace writes (0644, 0755).
  std::optional<uint32_t> file_mode;
  std::optional<uint32_t> dir_mode;
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
  // (fs/mount_journal.h); what it holds is restored first. Null: kept in memory only.
  std::shared_ptr<MountJournal> journal;

  // Writes. read_only (`-o ro`, or a cluster mount): every namespace refuses them.
  bool read_only = false;
  uint64_t write_budget = 512ull << 20;
  UploadOptions upload;
  uint32_t upload_threads = 16;
  // Where written files are staged for the cache (the first disk tier's folder) and how much
  // they may stage at once; empty: not staged (read back from the store).
  std::string stage_dir;
  uint64_t stage_capacity = 0;
  // Where the uploads in progress are recorded (UploadRegistry); empty: not recorded.
  std::string upload_registry;

  // The order hint (fs/order_hints.h) through `<mountpoint>/.lakecache/prefetch`; a window
  // of 0: no control folder.
  OrderHintOptions order_hint;
  // Cluster mode: hinted files are fetched by the workers that own their blocks, into their
  // caches, rather than into this mount's memory (HintTarget::Fetch; unset: the BlockStore's
  // staging, within its memory budget).
  std::function<uint64_t(const HintedFile& file, uint64_t first, uint64_t limit)> remote_prefetch;
  // The native data path's socket (native/native_server.h), which `.lakecache/native` names;
  // empty: no such control file.
  std::string native_socket;
};

// Who asks for a change: the calling thread as FUSE names it (its process is the opener of a
// file, whose close commits it).
struct Caller {
  pid_t pid = 0;
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

// An open folder: its entries as they were at opendir, numbered and given attributes a page at a
// time (FileSystem::ItemOf), so a folder of a million entries costs its listing, shared with the
// metadata cache, and nothing per entry.
// A folder of more than one page of the store's listing is opened as its first page comes: it is
// then served from the pages as they come (`stream`), in the order they came, and size() is what
// came so far.
struct OpenFolder {
  Namespace* ns = nullptr;
  std::string path;
  std::shared_ptr<const DirListing> listing;    // a namespace's folder
  std::shared_ptr<const ListingStream> stream;  // or its pages as they come
  std::vector<DirItem> fixed;                   // else: the mount's root, or a control folder
  size_t size() const;
};

struct OpenedFile {
  uint64_t fh = 0;
  bool keep_cache = false;  // the kernel may keep pages cached from an earlier open
  bool writing = false;     // open for writing (its bytes bypass the kernel's page cache)
};

class FileSystem {
 public:
  // The control folder (reachable by name, never listed) at the mount's root and at each
  // namespace's root, for pods that see only a namespace's folder; paths written to its file are
  // relative to the folder that holds it. Its inode numbers lie above every path's.
  static constexpr char kControlDir[] = ".lakecache";
  static constexpr char kPrefetchFile[] = "prefetch";
  static constexpr uint64_t kControlBase = 1ull << 62;
  static bool IsControl(uint64_t ino) { return ino >= kControlBase; }
  static uint64_t ControlDirOf(uint64_t folder) { return kControlBase + 2 * folder; }
  static uint64_t PrefetchFileOf(uint64_t folder) { return kControlBase + 2 * folder + 1; }
  // `.lakecache/native`: the path of the native data path's socket. Its own range, so that the
  // numbers above stay those an older server gave the kernel.
  static constexpr char kNativeFile[] = "native";
  static constexpr uint64_t kNativeBase = kControlBase + (1ull << 61);
  static uint64_t NativeFileOf(uint64_t folder) { return kNativeBase + folder; }

  FileSystem(std::unique_ptr<NamespaceTable> namespaces, std::shared_ptr<BlockStore> blocks,
             FileSystemOptions options);
  ~FileSystem();

  // The kernel holds what a lookup answers (one lookup more) until it forgets it (Forget).
  Result<FileAttr> Lookup(uint64_t parent, const std::string& name);
  // The kernel forgot `count` lookups of `ino`: its entry goes with the last.
  void Forget(uint64_t ino, uint64_t count);
  size_t held_inodes() const { return inodes_.held(); }
  size_t held_inode_bytes() const { return inodes_.held_bytes(); }
  // Up to `n` held files the kernel may be asked to forget (InodeTable::FilesToRelease), for a
  // mount that keeps what the kernel holds near a budget (fuse/inode_trimmer.h).
  std::vector<HeldInodes::Releasable> HeldFilesToRelease(size_t n) const {
    return inodes_.FilesToRelease(n);
  }
  Result<FileAttr> GetAttr(uint64_t ino);
  // Every entry of folder `ino` (tests, small folders: FUSE reads pages of OpenFolder).
  Result<std::vector<DirItem>> ReadDir(uint64_t ino);
  // Folder `ino` as it is now. With `on_stream`, a folder whose listing takes the store more than
  // one page is also handed to it as its first page comes (MetadataCache::List), a folder
  // served from its pages.
  using FolderHook = std::function<void(std::shared_ptr<const OpenFolder>)>;
  Result<std::shared_ptr<const OpenFolder>> ListFolder(uint64_t ino,
                                                       const FolderHook& on_stream = nullptr);
  // Entry `i` (< folder.size()) of an open folder.
  DirItem ItemOf(const OpenFolder& folder, size_t i) const;
  // Entry `i` of open folder `dir` as readdir sends it: its name (valid while `folder` is) and
  // attributes. With `acquire` (readdirplus, which the kernel takes as a lookup of each entry) its
  // inode is held once more. `scratch` is the caller's, reused from entry to entry.
  struct ListedItem {
    std::string_view name;
    FileAttr attr;
  };
  Result<ListedItem> Listed(uint64_t dir, const OpenFolder& folder, size_t i, bool acquire,
                            std::string* scratch);
  // `flags` as open(2) got them: O_RDONLY reads the object version seen now; a write access mode
  // opens the file for writing (see docs/semantics.md, "Writes").
  Result<OpenedFile> Open(uint64_t ino, int flags = O_RDONLY, Caller caller = {});
  // Reads up to dst.size() bytes at `offset`; short only at the end of the file.
  Result<size_t> Read(uint64_t fh, uint64_t offset, std::span<char> dst);
  // Like Read, without the copy where it can: when the range lies in one block held in memory, the
  // result points into that block and *pin holds it (keep it until the bytes are used); otherwise
  // the bytes are copied into `scratch` and the result points there.
  Result<std::span<const char>> ReadPinned(uint64_t fh, uint64_t offset, std::span<char> scratch,
                                           BlockRef* pin);
  void Release(uint64_t fh);

  // The native data path (native/native_server.h). The credentials of a reader on its socket:
  // a path is opened for it as the kernel would open it through the mount for that process.
  struct Reader {
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;
  };
  // The file at `path` (inside the mount, '/'-separated, relative to its root), when `reader` may
  // search every folder on the way and read it: EACCES otherwise, ENOENT, EISDIR.
  // It holds nothing: OpenNativePath opens such a file.
  Result<FileAttr> ResolveForReader(std::string_view path, const Reader& reader,
                                    InodeInfo* info = nullptr);
  // ResolveForReader, then a read handle of the file as OpenNative makes.
  Result<OpenedFile> OpenNativePath(std::string_view path, const Reader& reader);
  // Whether `reader` may read the file `ino` (an inode the kernel handed out: a FUSE open by the
  // reader's process already passed the kernel's check).
  Result<FileAttr> CheckReadable(uint64_t ino, const Reader& reader);
  // A read handle of the object version seen now, as Open(ino, O_RDONLY) makes, except that the
  // kernel knows nothing of it: not journaled for the next server, and no bearing on what the
  // kernel keeps in its page cache. Release it with Release.
  Result<OpenedFile> OpenNative(uint64_t ino);
  // The file's size and block size as a read handle sees them.
  struct HandleShape {
    uint64_t size = 0;
    uint64_t block_size = 0;
    uint64_t version = 0;  // a hash of the object version (ETag) the handle reads
  };
  Result<HandleShape> ShapeOf(uint64_t fh) const;
  // Whether a read of `fh` at `offset` would be served from memory (no fetch, no disk read): the
  // handle's pinned block or a resident tier's.
  bool InMemoryAt(uint64_t fh, uint64_t offset) const;
  // The key of the block of `fh` that holds `offset`; nullopt for an unknown handle.
  std::optional<BlockKey> BlockKeyAt(uint64_t fh, uint64_t offset) const;
  // Holds for one reader of blocks in place (cache_tier.h: ReaderHolds); null when no tier needs
  // them (no co-located worker's memory).
  std::unique_ptr<ReaderHolds> NewReaderHolds();
  // Whether `reader` may read every file of the mount (root, the mount's owner, or the mode every
  // file gets grants others read).
  bool ReadableByAll(const Reader& reader) const;

  // Writes. Errors are Status::Refused with the errno the contract names where the contract
  // refuses the call; store errors otherwise (EIO to the caller).
  struct Created {
    FileAttr attr;
    OpenedFile file;
  };
  Result<Created> Create(uint64_t parent, const std::string& name, int flags, Caller caller);
  Result<size_t> Write(uint64_t fh, uint64_t offset, std::span<const char> data,
                       Caller caller = {});
  // A close(2) of `fh` by `caller`: commits the file when the caller's process opened it and
  // wrote to it; returns the commit's error.
  Status Flush(uint64_t fh, Caller caller);
  Status Fsync(uint64_t fh);
  // setattr: a size change (`size` set) on `ino` (through `fh` when given); mode, owner and times
  // are accepted and not kept.
  Result<FileAttr> SetAttr(uint64_t ino, std::optional<uint64_t> size, uint64_t fh);
  Result<FileAttr> MakeDir(uint64_t parent, const std::string& name);
  Status RemoveDir(uint64_t parent, const std::string& name);
  Status Unlink(uint64_t parent, const std::string& name);
  // RENAME_NOREPLACE in `flags` refuses an existing target; RENAME_EXCHANGE is not supported.
  Status Rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                const std::string& new_name, unsigned flags);
  // True when some namespace may be written: the mount is then mounted read-write.
  bool writable() const;
  const std::string& native_socket() const { return options_.native_socket; }
  WriteBudget& write_budget() { return write_budget_; }
  const UploadCounters& upload_counters() const { return upload_counters_; }
  // Bytes readers got from files of the store (not counting files being written).
  uint64_t bytes_read() const { return bytes_read_.load(std::memory_order_relaxed); }
  UploadRegistry& upload_registry() { return *upload_registry_; }

  // A folder's entries, listed once at opendir and served from the handle by offset.
  Result<uint64_t> OpenDir(uint64_t ino);
  // The same, handing the handle to `opened` (once) as soon as it can be read: for a folder of
  // many pages, when the first came, while this thread lists the rest (DirItems' readers wait for
  // the entries they ask for).
  void OpenDir(uint64_t ino, const std::function<void(Result<uint64_t>)>& opened);
  // Waits until entry `i` of `folder` has come; an error if its listing failed before it.
  // Immediate unless the folder is served as its pages come.
  Status WaitForEntry(const OpenFolder& folder, size_t i) const;
  // The open folder `fh`; a handle not open here (kept by the kernel from before a restart of the
  // mount's server) is listed again from `ino` and kept under the same number.
  Result<std::shared_ptr<const OpenFolder>> DirItems(uint64_t fh, uint64_t ino);
  void ReleaseDir(uint64_t fh);

  // How long the kernel may cache an entry or attributes of `ino`: its namespace's metadata TTL
  // (a day for immutable namespaces; the shortest TTL for the multi-namespace root).
  double AttrTimeoutSeconds(uint64_t ino) const;

  BlockStore& blocks() { return *blocks_; }
  const NamespaceTable& namespaces() const { return *namespaces_; }
  // The object versions opened so far, by namespace (for `lakecache report`).
  ContentIndex& contents() { return contents_; }
  // The readers' announced orders; null without the control folder.
  OrderHints* order_hints() { return hints_.get(); }

 private:
  struct Handle;
  class HintFiles;
  // An open of the control file: an order being written, or the status being read.
  struct ControlHandle {
    uint64_t writer = 0;  // OrderHints' writer id; 0: opened to read
    std::string text;     // what a read returns
  };
  // The open file `fh` names (a number, never a pointer: a handle the kernel kept from before a
  // restart of the mount's server must not be taken for memory); null when it is not open here.
  Handle* FindHandle(uint64_t fh) const EXCLUDES(handles_mu_);
  static Status UnknownHandle(uint64_t fh);
  // The kernel is given (ns, path) once more (journaled when that changes the table). `parent`,
  // when known (not 0), is the held folder it is in: one probe instead of one per component.
  uint64_t AcquireInode(Namespace* ns, const std::string& path, bool is_dir, uint64_t parent = 0);
  // The previous server's inodes and open files (options_.journal).
  void RestoreFromJournal();
  // The entry `name` of `parent`, its inode acquired for the kernel when `held_parent` (the
  // number of `parent`, which the kernel holds) is given, else only numbered; *child (when given)
  // describes it.
  Result<FileAttr> Resolve(const InodeInfo& parent, const std::string& name, uint64_t held_parent,
                           InodeInfo* child = nullptr);
  Result<std::vector<DirItem>> ListRoot();
  // The attributes of inode `ino` of namespace `ns` (nullptr: the multi-namespace root), which
  // need not be held.
  FileAttr DirAttr(uint64_t ino, const Namespace* ns) const;
  // The permission bits of `ino`: `set` (a mount option), else `read_only` plus the owner's write
  // bit where its namespace writes.
  uint32_t ModeOf(const Namespace* ns, std::optional<uint32_t> set, uint32_t read_only) const;
  FileAttr FileAttrOf(uint64_t ino, const Namespace* ns, const DirEntry& entry) const;
  FileAttr FileAttrOf(uint64_t ino, const Namespace* ns, bool is_dir, uint64_t size,
                      int64_t mtime) const;
  Result<size_t> ReadBlock(Handle& h, uint64_t index, uint64_t offset_in_block,
                           std::span<char> dst);
  Result<size_t> ReadBlocks(Handle& h, uint64_t offset, std::span<char> dst);
  Result<std::span<const char>> ReadPinnedSpan(Handle& h, uint64_t offset, std::span<char> scratch,
                                               BlockRef* pin);
  // After a failed read: an object that changed under `h` gets its folder listed again.
  void NoteReadError(Handle& h, const Status& error);
  // kPreconditionFailed once an open in this mount found a newer version of the handle's file.
  Status CheckNotSuperseded(Handle& h);
  // Tells the handle's window of a read and starts the prefetches it asks for.
  void ReadAhead(Handle& h, uint64_t offset, uint64_t length);
  // Starts prefetching blocks [first, end) of one object version into staging, consecutive ones
  // in runs of up to max_run_blocks per GET; returns the first block not started because the
  // memory budget is full (`end` when all are started or held).
  uint64_t PrefetchBlocks(ObjectStore* store, const ContentId& content, const std::string& key,
                          const std::string& etag, uint64_t size, uint64_t block_size,
                          uint64_t first, uint64_t end);

  // The control folder (file_system_control.cc).
  void StartHints();
  bool HasControl() const { return hints_ != nullptr || !options_.native_socket.empty(); }
  Result<FileAttr> ControlAttr(uint64_t ino) const;
  Result<FileAttr> LookupControl(uint64_t parent, const std::string& name) const;
  Result<OpenedFile> OpenControl(uint64_t ino, int flags, Caller caller);
  // The control handle `fh`, copied out (null when `fh` is no control handle).
  std::optional<ControlHandle> FindControl(uint64_t fh) const EXCLUDES(handles_mu_);
  // The mount-relative path of (ns, path), as orders name files.
  std::string MountPath(const Namespace* ns, const std::string& path) const;
  // True when a read of block `key` should be a range read of the store (see
  // FileSystemOptions::range_reads_when_random).
  bool ReadRangeOnly(Handle& h, const BlockKey& key);
  Result<size_t> ReadRange(Handle& h, uint64_t offset, std::span<char> dst);
  // Keeps `block` as the handle's current block (see Handle::pinned).
  // `tier`: the memory tier the block came from (BlockStore::PinnedRead::tier), -1 if none.
  void Pin(Handle& h, uint64_t index, const BlockRef& block, int tier);

  // Writes (file_system_write.cc).
  bool Writable(const Namespace* ns) const;
  // Refused (EROFS) unless `ns` may be written.
  Status CheckWritable(const Namespace* ns, const std::string& path) const;
  // The namespace and path of `name` in folder `parent`.
  Result<std::pair<Namespace*, std::string>> ChildPath(uint64_t parent, const std::string& name);
  Result<OpenedFile> OpenWriter(Namespace* ns, const std::string& path, uint64_t ino, bool replaces,
                                Caller caller);
  std::shared_ptr<FileWriter> FindWriter(uint64_t fh) const EXCLUDES(handles_mu_);
  // The writer of `ino` not yet committed, if any.
  std::shared_ptr<FileWriter> WriterOf(uint64_t ino) const EXCLUDES(handles_mu_);
  // The error of a file written when the previous server died (see lost_writers_), else OK.
  Status LostWriter(uint64_t fh) const EXCLUDES(handles_mu_);
  // Commits `w` and shows its object (listing, cache); on failure the file leaves the listing.
  Status CommitWriter(FileWriter& w);
  // The written bytes of a committed object into the block cache, from its stage.
  void CacheWritten(Namespace* ns, const std::string& key, const ObjectInfo& info,
                    const WriteStage& stage);
  Result<OpenedFile> OpenForRead(uint64_t ino, const InodeInfo* info, const DirEntry& entry,
                                 bool native = false);
  // Makes the upload pool and registry when some namespace writes; aborts leftover uploads.
  void StartWrites();

  std::unique_ptr<NamespaceTable> namespaces_;
  std::shared_ptr<BlockStore> blocks_;
  const FileSystemOptions options_;
  const int64_t mount_time_;
  InodeTable inodes_;
  ContentIndex contents_;
  static constexpr size_t kRangeReadSlots = 4096;
  // Hashes of blocks read by range (see ReadRangeOnly), each in two slots; lossy.
  std::unique_ptr<std::atomic<uint64_t>[]> range_read_ =
      std::make_unique<std::atomic<uint64_t>[]>(kRangeReadSlots);
  mutable SharedMutex handles_mu_;
  std::unordered_map<uint64_t, std::unique_ptr<Handle>> handles_ GUARDED_BY(handles_mu_);
  std::unordered_map<uint64_t, std::shared_ptr<const OpenFolder>> dirs_ GUARDED_BY(handles_mu_);
  // Keeps an open folder under a new handle.
  uint64_t KeepDir(std::shared_ptr<const OpenFolder> folder) EXCLUDES(handles_mu_);
  std::unordered_map<uint64_t, std::shared_ptr<FileWriter>> writers_ GUARDED_BY(handles_mu_);
  std::unordered_map<uint64_t, ControlHandle> controls_ GUARDED_BY(handles_mu_);
  // Files being written when the previous server of the mount died (the journal's mark): their
  // bytes are gone, so every write, fsync and close of them fails.
  static constexpr char kWritingMark[] = "\x01writing";
  std::unordered_set<uint64_t> lost_writers_ GUARDED_BY(handles_mu_);
  uint64_t next_fh_ GUARDED_BY(handles_mu_) = 1;  // files and folders share the numbers
  Mutex etag_mu_;
  std::unordered_map<uint64_t, std::string> opened_etag_ GUARDED_BY(etag_mu_);
  WriteBudget write_budget_;
  UploadCounters upload_counters_;
  std::atomic<uint64_t> bytes_read_{0};
  std::unique_ptr<StageAllowance> stage_allowance_;
  std::unique_ptr<UploadRegistry> upload_registry_;
  std::unique_ptr<ThreadPool> upload_pool_;  // null when nothing may be written
  // Destroyed before what they use: the hints' thread first, then the prefetches it started
  // finish while the stores and blocks still exist.
  std::unique_ptr<ThreadPool> prefetch_pool_;  // null without read-ahead
  std::unique_ptr<HintTarget> hint_files_;     // a HintFiles
  std::unique_ptr<OrderHints> hints_;          // null without the control folder
};

}  // namespace lakecache
