#include "cache/cache_dir.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <utility>

namespace lakecache {
namespace fs = std::filesystem;
namespace {

// Shared so that a miss, frequent when the block is in no tier, allocates nothing.
Status DirError(const std::string& path, std::string_view what, int err) {
  return Status::IoError("disk cache dir " + path + ": " + std::string(what) + ": " +
                         std::generic_category().message(err));
}

// "<path>/blocks" with no trailing slash, so that the paths Scan finds equal those PathFor builds.
std::string BlocksRoot(const std::string& path) {
  fs::path p = fs::path(path).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  return (p / "blocks").string();
}

// Held for the life of the CacheDir: two processes sharing a directory would delete each other's
// temp files and overrun the capacity together.
Result<int> LockDir(const std::string& path) {
  std::string lock_path = path + "/LOCK";
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return DirError(path, "not writable", errno);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd);
    if (err != EWOULDBLOCK) return DirError(path, "lock", err);
    return Status::Unavailable("disk cache dir " + path + ": in use by another cache (" +
                               lock_path + " is locked)");
  }
  return fd;
}

struct FsSpace {
  uint64_t size = 0;
  uint64_t available = 0;  // to unprivileged writers: root's reserve is not ours to take
};

Result<FsSpace> StatFs(const std::string& path) {
  struct statvfs st;
  if (::statvfs(path.c_str(), &st) != 0) return DirError(path, "statvfs", errno);
  return FsSpace{st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize};
}

bool HasFloor(const DiskCacheConfig& c) { return c.min_free_bytes > 0 || c.min_free_ratio > 0; }

uint64_t FloorBytes(const DiskCacheConfig& c, uint64_t fs_size) {
  return std::max(c.min_free_bytes, static_cast<uint64_t>(c.min_free_ratio * fs_size));
}

}  // namespace

const Status& DiskBlockNotHeld() {
  static const Status miss = Status::NotFound("disk tier: block not held");
  return miss;
}

std::optional<std::string> CapacityBeyondDisk(const DiskCacheConfig& config) {
  fs::path at = config.path;
  std::error_code ec;
  while (!at.empty() && !fs::exists(at, ec) && at.has_parent_path() && at != at.parent_path()) {
    at = at.parent_path();
  }
  Result<FsSpace> space = StatFs(at.string());
  if (!space.ok()) return std::nullopt;  // the cache's own start says why
  uint64_t floor = HasFloor(config) ? FloorBytes(config, space->size) : 0;
  uint64_t most = space->size - std::min(space->size, floor);
  if (config.capacity <= most) return std::nullopt;
  return "disk cache dir " + config.path + ": " + HumanByteSize(config.capacity) +
         " configured, but its file system holds " + HumanByteSize(space->size) +
         (floor > 0 ? " (less the free-space floor of " + HumanByteSize(floor) + ")" : "") +
         ": the disk tier there holds at most " + HumanByteSize(most) +
         "; give a smaller --cache-size (or cache.disks[].capacity)";
}

Result<std::unique_ptr<CacheDir>> CacheDir::Open(const DiskCacheConfig& config,
                                                 std::string_view policy, uint64_t seed,
                                                 TierCounters* counters) {
  std::string root = BlocksRoot(config.path);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) return DirError(config.path, "cannot create", ec.value());
  LC_ASSIGN_OR_RETURN(int lock_fd, LockDir(config.path));
  std::unique_ptr<CacheDir> dir(new CacheDir(config, std::move(root), lock_fd, counters));
  LC_ASSIGN_OR_RETURN(std::vector<Found> found, dir->Scan());
  LC_ASSIGN_OR_RETURN(uint64_t capacity, dir->UsableCapacity(found));
  // Admission on miss: a block the policy would drop again soon after is never written.
  LC_ASSIGN_OR_RETURN(dir->policy_, MakeEvictionPolicy(policy, capacity, seed, Admission::kOnMiss));
  for (const Found& f : found) dir->Adopt(f.key, f.bytes);
  return dir;
}

CacheDir::CacheDir(DiskCacheConfig config, std::string root, int lock_fd, TierCounters* counters)
    : config_(std::move(config)),
      blocks_root_(std::move(root)),
      lock_fd_(lock_fd),
      counters_(counters) {}

CacheDir::~CacheDir() { ::close(lock_fd_); }

std::string CacheDir::PathFor(const BlockKey& key) const {
  // Two levels of 256 folders keep directories small even for millions of one-block files.
  uint64_t h = StableKeyHash(key);
  char folders[16];
  std::snprintf(folders, sizeof(folders), "/%02x/%02x/", static_cast<unsigned>(h >> 56),
                static_cast<unsigned>((h >> 48) & 0xff));
  return blocks_root_ + folders + key.ToString() + std::string(kBlockFileSuffix);
}

CacheDir::Shard& CacheDir::ShardFor(const BlockKey& key) const {
  // The low bits of BlockKeyHash pick the map bucket; mixing keeps shard and bucket choice apart.
  size_t h = BlockKeyHash()(key);
  return shards_[((h ^ (h >> 29)) * 0x9E3779B97F4A7C15ull >> 32) % kShards];
}

// ---- Reads ----

Result<BlockFile> CacheDir::OpenVerified(const BlockKey& key) const {
  std::string path = PathFor(key);
  LC_ASSIGN_OR_RETURN(BlockFile file, BlockFile::Open(path));
  if (file.header().key != key) {
    return Status::Corruption(path + ": holds block " + file.header().key.ToString());
  }
  return file;
}

Result<BlockRef> CacheDir::Get(const BlockKey& key) {
  std::optional<uint64_t> gen = OnDiskGen(key);
  if (!gen) return DiskBlockNotHeld();
  Result<BlockRef> block = BlockFile::ReadWhole(PathFor(key), key);
  if (!block.ok()) return Miss(key, *gen, block.status());
  policy_->OnHit(key);
  return block;
}

Result<size_t> CacheDir::Read(const BlockKey& key, uint64_t offset, std::span<char> dst,
                              bool count_access) {
  std::optional<uint64_t> gen = OnDiskGen(key);
  if (!gen) return DiskBlockNotHeld();
  Result<BlockFile> file = OpenVerified(key);
  Result<size_t> n = file.ok() ? file->Read(offset, dst) : Result<size_t>(file.status());
  if (!n.ok()) return Miss(key, *gen, n.status());
  if (count_access) policy_->OnHit(key);
  return n;
}

// A block that failed to read is dropped: the reader refetches it, and it must not fail again.
Status CacheDir::Miss(const BlockKey& key, uint64_t gen, const Status& why) {
  bool corrupt = why.code() == StatusCode::kCorruption || why.code() == StatusCode::kUnimplemented;
  if (why.code() != StatusCode::kNotFound) {
    spdlog::warn("disk cache: dropping block: {}", why.ToString());
  }
  bool dropped;
  {
    MutexLock lock(&mutate_mu_);
    dropped = Drop(key, gen, /*tell_policy=*/true);
  }
  if (dropped && corrupt) counters_->Add(counters_->corrupt_blocks);
  return Status::NotFound("disk tier: " + why.message());
}

bool CacheDir::Touch(const BlockKey& key) {
  if (!OnDiskGen(key)) return false;
  policy_->OnHit(key);
  return true;
}

bool CacheDir::Contains(const BlockKey& key) const { return OnDiskGen(key).has_value(); }

void CacheDir::ForEachKey(const std::function<void(const BlockKey&)>& fn) const {
  for (Shard& shard : shards_) {
    MutexLock lock(&shard.mu);
    for (const auto& [key, entry] : shard.entries) {
      if (entry.state == State::kOnDisk) fn(key);
    }
  }
}

std::optional<uint64_t> CacheDir::OnDiskGen(const BlockKey& key) const {
  Shard& shard = ShardFor(key);
  MutexLock lock(&shard.mu);
  auto it = shard.entries.find(key);
  if (it == shard.entries.end() || it->second.state != State::kOnDisk) return std::nullopt;
  return it->second.gen;
}

// ---- Writes ----

std::optional<uint64_t> CacheDir::Admit(const BlockRequest& request, uint64_t data_bytes) {
  const BlockKey& key = request.key;
  uint64_t bytes = BlockFileSize(request.object_key.size(), request.etag.size(), data_bytes);
  std::optional<uint64_t> gen = Claim(key, bytes);
  if (!gen) return std::nullopt;  // held already, or another thread is writing it
  MutexLock lock(&mutate_mu_);
  std::vector<BlockKey> victims;
  bool admit = policy_->OnMiss(key, bytes, &victims);
  DropVictims(victims);
  if (!admit || !Charge(key, *gen)) {
    Decline(key, *gen, counters_->rejected);
    return std::nullopt;
  }
  return gen;
}

bool CacheDir::Write(const BlockRequest& request, const Block& block, uint64_t gen) {
  const BlockKey& key = request.key;
  // Evicted or erased while it waited in the write-behind queue: nothing to write.
  if (!IsCharged(key, gen)) return false;
  uint64_t bytes = BlockFileSize(request.object_key.size(), request.etag.size(), block.size());
  if (!ReserveDiskSpace(bytes)) {
    MutexLock lock(&mutate_mu_);
    return Decline(key, gen, counters_->rejected);
  }
  Status written = WriteBlockFile(PathFor(key), request, block.bytes());
  ReleaseDiskSpace(bytes);
  MutexLock lock(&mutate_mu_);
  if (!written.ok()) {
    spdlog::warn("disk cache: not caching block: {}", written.ToString());
    return Decline(key, gen, counters_->write_errors);
  }
  if (!Publish(key, gen)) return false;
  counters_->Add(counters_->inserts);
  return true;
}

std::optional<uint64_t> CacheDir::Claim(const BlockKey& key, uint64_t bytes) {
  Shard& shard = ShardFor(key);
  MutexLock lock(&shard.mu);
  auto [it, inserted] = shard.entries.try_emplace(key);
  if (!inserted) return std::nullopt;
  it->second = Entry{bytes, next_gen_.fetch_add(1, std::memory_order_relaxed), State::kClaimed};
  return it->second.gen;
}

bool CacheDir::IsCharged(const BlockKey& key, uint64_t gen) const {
  Shard& shard = ShardFor(key);
  MutexLock lock(&shard.mu);
  auto it = shard.entries.find(key);
  return it != shard.entries.end() && it->second.gen == gen && it->second.state == State::kCharged;
}

// The capacity is the tier's promise, not only the policy's.
bool CacheDir::Charge(const BlockKey& key, uint64_t gen) {
  Shard& shard = ShardFor(key);
  MutexLock lock(&shard.mu);
  auto it = shard.entries.find(key);
  if (it == shard.entries.end() || it->second.gen != gen) return false;
  if (held_bytes_ + it->second.bytes > policy_->capacity_bytes()) return false;
  held_bytes_ += it->second.bytes;
  it->second.state = State::kCharged;
  return true;
}

bool CacheDir::Publish(const BlockKey& key, uint64_t gen) {
  {
    Shard& shard = ShardFor(key);
    MutexLock lock(&shard.mu);
    auto it = shard.entries.find(key);
    if (it != shard.entries.end() && it->second.gen == gen) {
      it->second.state = State::kOnDisk;
      used_bytes_.fetch_add(it->second.bytes, std::memory_order_relaxed);
      blocks_.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
    // A later insert of the key is writing the same file: it is that insert's to keep.
    if (it != shard.entries.end()) return false;
  }
  ::unlink(PathFor(key).c_str());  // evicted while it was being written
  return false;
}

bool CacheDir::Decline(const BlockKey& key, uint64_t gen, std::atomic<uint64_t>& counter) {
  Drop(key, gen, /*tell_policy=*/true);
  counters_->Add(counter);
  return false;
}

// Under mutate_mu_, so no insert of the key can rename a new file into place before the old one is
// unlinked here.
bool CacheDir::Drop(const BlockKey& key, std::optional<uint64_t> gen, bool tell_policy) {
  Entry entry;
  {
    Shard& shard = ShardFor(key);
    MutexLock lock(&shard.mu);
    auto it = shard.entries.find(key);
    if (it == shard.entries.end() || (gen && it->second.gen != *gen)) return false;
    entry = it->second;
    shard.entries.erase(it);
  }
  if (entry.state != State::kClaimed) held_bytes_ -= entry.bytes;
  if (entry.state == State::kOnDisk) {
    ::unlink(PathFor(key).c_str());
    used_bytes_.fetch_sub(entry.bytes, std::memory_order_relaxed);
    blocks_.fetch_sub(1, std::memory_order_relaxed);
  }
  if (tell_policy) policy_->Remove(key);
  return true;
}

void CacheDir::DropVictims(const std::vector<BlockKey>& victims) {
  if (!victims.empty()) LogEvictions("disk:" + config_.path, victims);
  for (const BlockKey& victim : victims) {
    if (Drop(victim, std::nullopt, /*tell_policy=*/false)) counters_->Add(counters_->evictions);
  }
}

bool CacheDir::Erase(const BlockKey& key) {
  MutexLock lock(&mutate_mu_);
  return Drop(key, std::nullopt, /*tell_policy=*/true);
}

// ---- Free-space floor ----

// The write-time half of the floor (Open applies the other): other files on the file system may
// have grown since. Checks and reserves under one lock, counting writes in flight, so concurrent
// inserts cannot each take room that only one of them may have.
bool CacheDir::ReserveDiskSpace(uint64_t bytes) {
  if (!HasFloor(config_)) return true;  // no floor: only ENOSPC stops a write
  MutexLock lock(&space_mu_);
  Result<FsSpace> space = StatFs(config_.path);
  if (!space.ok()) {
    spdlog::warn("disk cache: not caching block: {}", space.status().ToString());
    return false;
  }
  uint64_t available = space->available - std::min(space->available, writing_bytes_);
  uint64_t floor = FloorBytes(config_, space->size);
  if (available < floor + bytes) {
    if (!below_floor_.exchange(true)) {
      spdlog::warn(
          "disk cache dir {}: the disk is full ({} free, min_free keeps {}): no more blocks are "
          "cached there until space frees up; the tier holds {} now",
          config_.path, HumanByteSize(space->available), HumanByteSize(floor),
          HumanByteSize(used_bytes()));
    }
    return false;
  }
  if (below_floor_.exchange(false)) {
    spdlog::info("disk cache dir {}: space freed up, caching blocks there again", config_.path);
  }
  writing_bytes_ += bytes;
  return true;
}

void CacheDir::ReleaseDiskSpace(uint64_t bytes) {
  if (!HasFloor(config_)) return;
  MutexLock lock(&space_mu_);
  writing_bytes_ -= bytes;
}

// ---- Recovery ----

Result<std::vector<CacheDir::Found>> CacheDir::Scan() {
  std::vector<Found> found;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(blocks_root_, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::error_code file_ec;
    if (!it->is_regular_file(file_ec)) continue;
    std::optional<BlockFileHeader> h = Examine(it->path().string());
    if (!h) continue;
    uint64_t bytes = BlockFileSize(h->object_key.size(), h->etag.size(), h->data_length);
    found.push_back({h->key, bytes, fs::last_write_time(it->path(), file_ec)});
  }
  if (ec) return DirError(config_.path, "scan " + blocks_root_, ec.value());
  // Oldest first, so a recency policy starts from the order the blocks were written in.
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.mtime < b.mtime; });
  return found;
}

// The open-time half of the floor: the policy gets what the file system can hold above the floor
// (counting the blocks already here), so its own evictions keep the floor in steady state. A disk
// already past the floor makes the Restores evict until it is not.
Result<uint64_t> CacheDir::UsableCapacity(const std::vector<Found>& found) const {
  if (!HasFloor(config_)) return config_.capacity;
  LC_ASSIGN_OR_RETURN(FsSpace space, StatFs(config_.path));
  uint64_t room = space.available;
  for (const Found& f : found) room += f.bytes;
  uint64_t floor = FloorBytes(config_, space.size);
  uint64_t usable = std::min(config_.capacity, room - std::min(room, floor));
  if (usable < config_.capacity) {
    spdlog::warn(
        "disk cache dir {}: {} ({} free, min_free keeps {}): the disk tier there holds at most {}, "
        "not the {} configured",
        config_.path, usable == 0 ? "the disk is full" : "the disk is short of room",
        HumanByteSize(space.available), HumanByteSize(floor), HumanByteSize(usable),
        HumanByteSize(config_.capacity));
  }
  return usable;
}

std::optional<BlockFileHeader> CacheDir::Examine(const std::string& path) {
  std::string name = fs::path(path).filename().string();
  std::error_code ec;
  if (IsBlockFileTempName(name)) {  // a write cut short by a crash
    fs::remove(path, ec);
    return std::nullopt;
  }
  if (!name.ends_with(kBlockFileSuffix)) return std::nullopt;  // not ours: left alone
  Result<BlockFile> file = BlockFile::Open(path);
  if (file.ok() && PathFor(file->header().key) == path) return file->header();
  Status why = file.ok() ? Status::Corruption(path + ": misplaced block file") : file.status();
  if (why.code() == StatusCode::kNotFound) return std::nullopt;
  if (why.code() == StatusCode::kUnimplemented) {
    spdlog::info("disk cache: removing {}", why.ToString());
  } else {
    spdlog::warn("disk cache: removing {}", why.ToString());
    counters_->Add(counters_->corrupt_blocks);
  }
  fs::remove(path, ec);
  return std::nullopt;
}

void CacheDir::Adopt(const BlockKey& key, uint64_t bytes) {
  MutexLock lock(&mutate_mu_);
  {
    Shard& shard = ShardFor(key);
    MutexLock shard_lock(&shard.mu);
    shard.entries[key] = Entry{bytes, next_gen_.fetch_add(1), State::kOnDisk};
  }
  held_bytes_ += bytes;
  used_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  blocks_.fetch_add(1, std::memory_order_relaxed);
  std::vector<BlockKey> victims;
  policy_->Restore(key, bytes, &victims);
  DropVictims(victims);
}

}  // namespace lakecache
