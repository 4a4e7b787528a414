#include "client/file_system.h"

#include <sys/stat.h>

#include <algorithm>
#include <ctime>
#include <limits>

namespace lakecache {
namespace {

constexpr double kImmutableTimeout = 86400.0;
constexpr auto kBlockFetchTimeout = std::chrono::minutes(5);

std::string Join(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : dir + "/" + name;
}

// Fetches one block of an object version from its store (the BlockStore's miss path).
Result<BlockRef> FetchBlock(ObjectStore& store, const BlockRequest& r) {
  std::shared_ptr<Block> block = Block::Allocate(r.length);
  ReadOptions options;
  options.deadline = Clock::now() + kBlockFetchTimeout;
  options.if_match = r.etag;
  uint64_t done = 0;
  while (done < r.length) {
    std::span<char> rest(block->mutable_data() + done, r.length - done);
    LC_ASSIGN_OR_RETURN(size_t n, store.Read(r.object_key, r.offset + done, rest, options));
    if (n == 0) {
      return Status::Unavailable(store.Describe() + "/" + r.object_key + ": object ended at " +
                                 std::to_string(r.offset + done) + " bytes, shorter than listed");
    }
    done += n;
  }
  return BlockRef(std::move(block));
}

}  // namespace

// An open file: one version of one object, pinned at open.
struct FileSystem::Handle {
  Namespace* ns;
  std::string object_key;
  std::string etag;
  uint64_t size;
  uint64_t block_size;
  ContentId content;
  // The block this handle read last: later reads of it are not counted again by the eviction
  // policies, which want one access per block per reading stream.
  std::atomic<uint64_t> last_block{UINT64_MAX};
};

FileSystem::FileSystem(std::unique_ptr<NamespaceTable> namespaces,
                       std::shared_ptr<BlockStore> blocks, FileSystemOptions options)
    : namespaces_(std::move(namespaces)),
      blocks_(std::move(blocks)),
      options_(options),
      mount_time_(std::time(nullptr)),
      inodes_(InodeInfo{
          options.single_namespace_root ? namespaces_->Find(namespaces_->names()[0]) : nullptr, "",
          true}) {}

FileSystem::~FileSystem() = default;

FileAttr FileSystem::DirAttr(uint64_t ino) const {
  FileAttr a;
  a.ino = ino;
  a.is_dir = true;
  a.mode = S_IFDIR | options_.dir_mode;
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
  a.mode = S_IFREG | options_.file_mode;
  a.uid = options_.uid;
  a.gid = options_.gid;
  return a;
}

Result<FileAttr> FileSystem::Resolve(const InodeInfo& parent, const std::string& name) {
  if (parent.ns == nullptr) {  // the multi-namespace root: its entries are the namespaces
    Namespace* ns = namespaces_->Find(name);
    if (ns == nullptr) return Status::NotFound("no namespace named '" + name + "'");
    return DirAttr(inodes_.Assign(ns, "", true));
  }
  std::string path = Join(parent.path, name);
  LC_ASSIGN_OR_RETURN(DirEntry entry, parent.ns->meta->Stat(path));
  return FileAttrOf(inodes_.Assign(parent.ns, path, entry.is_dir), entry);
}

Result<FileAttr> FileSystem::Lookup(uint64_t parent, const std::string& name) {
  std::optional<InodeInfo> info = inodes_.Get(parent);
  if (!info) return Status::NotFound("stale inode " + std::to_string(parent));
  if (!info->is_dir) return Status::InvalidArgument("not a folder");
  return Resolve(*info, name);
}

Result<FileAttr> FileSystem::GetAttr(uint64_t ino) {
  std::optional<InodeInfo> info = inodes_.Get(ino);
  if (!info) return Status::NotFound("stale inode " + std::to_string(ino));
  if (info->ns == nullptr || info->path.empty()) return DirAttr(ino);
  LC_ASSIGN_OR_RETURN(DirEntry entry, info->ns->meta->Stat(info->path));
  if (entry.is_dir != info->is_dir) {
    return Status::NotFound(info->path + ": replaced by a " + (entry.is_dir ? "folder" : "file"));
  }
  return FileAttrOf(ino, entry);
}

Result<std::vector<DirItem>> FileSystem::ListRoot() {
  std::vector<DirItem> items;
  for (const std::string& name : namespaces_->names()) {
    items.push_back({name, DirAttr(inodes_.Assign(namespaces_->Find(name), "", true))});
  }
  return items;
}

Result<std::vector<DirItem>> FileSystem::ReadDir(uint64_t ino) {
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
    uint64_t child = inodes_.Assign(info->ns, Join(info->path, e.name), e.is_dir);
    items.push_back({e.name, FileAttrOf(child, e)});
  }
  return items;
}

Result<OpenedFile> FileSystem::Open(uint64_t ino) {
  std::optional<InodeInfo> info = inodes_.Get(ino);
  if (!info) return Status::NotFound("stale inode " + std::to_string(ino));
  if (info->is_dir || info->ns == nullptr) return Status::InvalidArgument("is a folder");
  LC_ASSIGN_OR_RETURN(DirEntry entry, info->ns->meta->Stat(info->path));
  if (entry.is_dir) return Status::InvalidArgument("is a folder");
  const NamespaceConfig& nsc = info->ns->config;
  std::string key = info->ns->meta->ObjectKey(info->path);
  auto* h =
      new Handle{info->ns,       key,
                 entry.etag,     entry.size,
                 nsc.block_size, MakeContentId(info->ns->name, key, entry.etag, nsc.block_size)};
  OpenedFile opened;
  opened.fh = reinterpret_cast<uint64_t>(h);
  std::lock_guard lock(etag_mu_);
  std::string& last = opened_etag_[ino];
  opened.keep_cache = last == entry.etag;
  last = entry.etag;
  return opened;
}

Result<size_t> FileSystem::ReadBlock(Handle& h, uint64_t index, uint64_t offset_in_block,
                                     std::span<char> dst) {
  BlockRequest req;
  req.key = BlockKey{h.content, index};
  req.object_key = h.object_key;
  req.etag = h.etag;
  req.offset = index * h.block_size;
  req.length = std::min<uint64_t>(h.block_size, h.size - req.offset);
  req.repeat_access = h.last_block.exchange(index, std::memory_order_relaxed) == index;
  ObjectStore& store = *h.ns->store;
  return blocks_->Read(req, offset_in_block, dst,
                       [&store](const BlockRequest& r) { return FetchBlock(store, r); });
}

Result<size_t> FileSystem::Read(uint64_t fh, uint64_t offset, std::span<char> dst) {
  Handle& h = *reinterpret_cast<Handle*>(fh);
  if (offset >= h.size || dst.empty()) return size_t{0};
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

void FileSystem::Release(uint64_t fh) { delete reinterpret_cast<Handle*>(fh); }

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
