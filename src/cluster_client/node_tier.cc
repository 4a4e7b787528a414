#include "cluster_client/node_tier.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <map>

#include "cache/memory_tier.h"
#include "cluster_client/node_memory.h"

namespace lakecache {
namespace {

constexpr auto kSweepInterval = std::chrono::seconds(1);
constexpr auto kLocateTimeout = std::chrono::seconds(5);

const Status& MissStatus() {
  static const Status miss = Status::NotFound("not in the node's cache");
  return miss;
}

}  // namespace

BlockRef NodeMemoryTier::Pin(const BlockKey& key, bool count_access) {
  (void)count_access;  // the worker's policy does not see mapped reads
  BlockRef block = client_->FindLocal(key);
  counters_.Add(block != nullptr ? counters_.hits : counters_.misses);
  return block;
}

Result<BlockRef> NodeMemoryTier::Get(const BlockKey& key) {
  BlockRef block = Pin(key, true);
  if (block == nullptr) return MissStatus();
  return block;
}

Result<size_t> NodeMemoryTier::Read(const BlockKey& key, uint64_t offset, std::span<char> dst,
                                    bool count_access) {
  BlockRef block = Pin(key, count_access);
  if (block == nullptr) return MissStatus();
  if (offset >= block->size()) return size_t{0};
  size_t n = std::min<uint64_t>(dst.size(), block->size() - offset);
  std::memcpy(dst.data(), block->data() + offset, n);
  return n;
}

namespace {

// A reader's holds: one session of its own with each co-located worker it reads in place, opened
// when it first does, whose socket the reader keeps too.
class NodeReaderHolds : public ReaderHolds {
 public:
  explicit NodeReaderHolds(std::shared_ptr<ClusterClient> client) : client_(std::move(client)) {}

  BlockRef Hold(const BlockKey& key, const BlockRef& block, int* keep) override {
    *keep = -1;
    std::string id;
    std::string path = client_->LocalNodeSocketOf(block->fd(), &id);
    if (path.empty()) return block;
    std::shared_ptr<ShmReader> session;
    {
      MutexLock lock(&mu_);
      auto it = sessions_.find(id);
      if (it != sessions_.end() && !it->second->closed()) session = it->second;
    }
    if (session == nullptr) {
      Result<std::shared_ptr<ShmReader>> opened = OpenWorkerSession(path, false);
      if (!opened.ok()) {
        spdlog::warn("a reader's session with worker {}: {}; its blocks are copied", id,
                     opened.status().message());
        return nullptr;
      }
      session = *opened;
      *keep = ::fcntl(session->session_fd(), F_DUPFD_CLOEXEC, 0);
      MutexLock lock(&mu_);
      sessions_[id] = session;
    }
    BlockRef held = session->Find(key);
    // The same bytes, or none: the worker may have put the key elsewhere since.
    if (held == nullptr || held->size() != block->size() ||
        held->fd_offset() != block->fd_offset()) {
      return nullptr;
    }
    return held;
  }

 private:
  const std::shared_ptr<ClusterClient> client_;
  Mutex mu_;
  std::map<std::string, std::shared_ptr<ShmReader>> sessions_ GUARDED_BY(mu_);  // by worker id
};

}  // namespace

std::unique_ptr<ReaderHolds> NodeMemoryTier::NewReaderHolds() {
  return std::make_unique<NodeReaderHolds>(client_);
}

TierStats NodeMemoryTier::Stats() const {
  TierStats stats;
  stats.tier = name_;
  counters_.CopyTo(&stats);
  return stats;
}

NodeDiskTier::NodeDiskTier(std::shared_ptr<ClusterClient> client, size_t max_files)
    : client_(std::move(client)), max_files_(max_files) {
  sweeper_ = std::thread([this] {
    for (;;) {
      {
        auto until = std::chrono::steady_clock::now() + kSweepInterval;
        MutexLock lock(&stop_mu_);
        while (!stopping_ && stop_cv_.WaitUntil(&stop_mu_, until)) continue;
        if (stopping_) return;
      }
      Sweep();
    }
  });
}

NodeDiskTier::~NodeDiskTier() {
  {
    MutexLock lock(&stop_mu_);
    stopping_ = true;
  }
  stop_cv_.SignalAll();
  sweeper_.join();
}

void NodeDiskTier::Sweep() {
  std::vector<FileRef> closed;  // closed outside the lock
  MutexLock lock(&mu_);
  for (auto it = files_.begin(); it != files_.end();) {
    if (!it->second.file->Unlinked()) {
      ++it;
      continue;
    }
    closed.push_back(std::move(it->second.file));
    lru_.erase(it->second.lru);
    it = files_.erase(it);
    counters_.Add(counters_.evictions);
  }
}

NodeDiskTier::FileRef NodeDiskTier::Open(const BlockKey& key) {
  {
    MutexLock lock(&mu_);
    auto it = files_.find(key);
    if (it != files_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return it->second.file;
    }
  }
  Result<std::string> path = client_->LocateLocal(key, Clock::now() + kLocateTimeout);
  if (!path.ok()) return nullptr;
  // The file must be the block asked for (the same content id and index: the same object
  // version), and every chunk read is verified against its checksum.
  Result<BlockFile> file = BlockFile::Open(*path);
  if (!file.ok() || !(file->header().key == key)) return nullptr;
  auto opened = std::make_shared<const BlockFile>(std::move(*file));
  FileRef dropped;
  MutexLock lock(&mu_);
  auto [it, inserted] = files_.try_emplace(key);
  if (!inserted) return it->second.file;  // opened by another reader meanwhile
  lru_.push_front(key);
  it->second = Entry{opened, lru_.begin()};
  if (files_.size() > max_files_) {
    auto last = files_.find(lru_.back());
    dropped = std::move(last->second.file);
    files_.erase(last);
    lru_.pop_back();
  }
  return opened;
}

Result<size_t> NodeDiskTier::Read(const BlockKey& key, uint64_t offset, std::span<char> dst,
                                  bool count_access) {
  (void)count_access;
  FileRef file = Open(key);
  if (file == nullptr) {
    counters_.Add(counters_.misses);
    return MissStatus();
  }
  Result<size_t> n = file->Read(offset, dst);
  if (!n.ok()) {
    // Rotten bytes: never served; the block is read from its worker instead.
    counters_.Add(counters_.corrupt_blocks);
    Erase(key);
    return MissStatus();
  }
  counters_.Add(counters_.hits);
  client_->CountShortCircuitRead("a worker on this host");
  return n;
}

Result<BlockRef> NodeDiskTier::Get(const BlockKey& key) {
  FileRef file = Open(key);
  if (file == nullptr) {
    counters_.Add(counters_.misses);
    return MissStatus();
  }
  Result<BlockRef> block = file->ReadAll();
  if (!block.ok()) {
    counters_.Add(counters_.corrupt_blocks);
    Erase(key);
    return MissStatus();
  }
  counters_.Add(counters_.hits);
  client_->CountShortCircuitRead("a worker on this host");
  return block;
}

bool NodeDiskTier::Contains(const BlockKey& key) const {
  MutexLock lock(&mu_);
  return files_.contains(key);
}

void NodeDiskTier::Erase(const BlockKey& key) {
  FileRef dropped;
  MutexLock lock(&mu_);
  auto it = files_.find(key);
  if (it == files_.end()) return;
  dropped = std::move(it->second.file);
  lru_.erase(it->second.lru);
  files_.erase(it);
}

size_t NodeDiskTier::open_files() const {
  MutexLock lock(&mu_);
  return files_.size();
}

TierStats NodeDiskTier::Stats() const {
  TierStats stats;
  stats.tier = name_;
  counters_.CopyTo(&stats);
  MutexLock lock(&mu_);
  stats.blocks = files_.size();
  return stats;
}

Result<std::shared_ptr<BlockStore>> ClusterBlockStore(const std::shared_ptr<ClusterClient>& client,
                                                      const CacheConfig& config, bool node_tiers,
                                                      std::shared_ptr<MemoryBudget> budget,
                                                      std::shared_ptr<ShmArena> arena) {
  std::vector<std::unique_ptr<CacheTier>> tiers;
  if (node_tiers) tiers.push_back(std::make_unique<NodeMemoryTier>(client));
  auto memory =
      MemoryTier::Create(config.memory_capacity, config.policy, /*seed=*/0, std::move(arena));
  if (!memory.ok()) return memory.status().WithContext("cache.policy");
  tiers.push_back(std::move(*memory));
  if (node_tiers) tiers.push_back(std::make_unique<NodeDiskTier>(client));
  return std::make_shared<BlockStore>(std::move(tiers), std::move(budget));
}

}  // namespace lakecache
