#include "worker/holder_book.h"

#include <algorithm>

namespace lakecache {

HolderBook::Entry& HolderBook::Touch(const BlockKey& key) {
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    ages_.splice(ages_.end(), ages_, it->second.age);
    return it->second;
  }
  while (!ages_.empty() && entries_.size() >= std::max<size_t>(options_.max_blocks, 1)) {
    entries_.erase(ages_.front());
    ages_.pop_front();
  }
  ages_.push_back(key);
  Entry& entry = entries_[key];
  entry.age = std::prev(ages_.end());
  return entry;
}

std::optional<std::string> HolderBook::Route(const BlockKey& key, const std::string& requester,
                                             std::chrono::steady_clock::time_point now) {
  MutexLock lock(&mu_);
  Entry& entry = Touch(key);
  std::optional<std::string> from;
  bool chained = false;
  const bool again =
      std::find(entry.holders.begin(), entry.holders.end(), requester) != entry.holders.end();
  if (again) {
    // It lost its copy (evicted, restarted). Those routed after it may be fetching from it: sent
    // to one of them it could wait on itself, so the owner serves it.
  } else if (!entry.tail.empty() && now - entry.tail_at < options_.in_flight) {
    // Still fetching it: the requester follows it in the chain, or starts a new one at the owner.
    chained = entry.tail_depth < std::max<size_t>(options_.max_chain, 1);
    if (chained) from = entry.tail;
  } else {
    // The owner and the holders other than the requester, in turn.
    std::vector<const std::string*> others;
    for (const std::string& h : entry.holders) {
      if (h != requester) others.push_back(&h);
    }
    size_t turn = entry.next++ % (others.size() + 1);
    if (turn > 0) from = *others[turn - 1];
  }
  AddHolder(entry, requester);
  entry.tail_depth = chained ? entry.tail_depth + 1 : 1;
  entry.tail = requester;
  entry.tail_at = now;
  return from;
}

void HolderBook::AddHolder(Entry& entry, const std::string& holder) {
  if (std::find(entry.holders.begin(), entry.holders.end(), holder) != entry.holders.end()) return;
  if (entry.holders.size() >= std::max<size_t>(options_.max_holders, 1)) {
    entry.holders.erase(entry.holders.begin());
  }
  entry.holders.push_back(holder);
}

void HolderBook::Forget(const BlockKey& key) {
  MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  it->second.holders.clear();
  it->second.tail.clear();
}

void HolderBook::Note(const BlockKey& key, const std::string& holder) {
  MutexLock lock(&mu_);
  AddHolder(Touch(key), holder);
}

void HolderBook::Drop(const BlockKey& key, const std::string& holder) {
  MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  std::erase(it->second.holders, holder);
  if (it->second.tail == holder) it->second.tail.clear();
}

void HolderBook::DropWorker(const std::string& worker) {
  MutexLock lock(&mu_);
  for (auto& [key, entry] : entries_) {
    std::erase(entry.holders, worker);
    if (entry.tail == worker) entry.tail.clear();
  }
}

std::optional<uint64_t> HolderBook::Digest(const BlockKey& key) const {
  MutexLock lock(&mu_);
  auto it = entries_.find(key);
  return it == entries_.end() ? std::nullopt : it->second.digest;
}

void HolderBook::SetDigest(const BlockKey& key, uint64_t digest) {
  MutexLock lock(&mu_);
  Touch(key).digest = digest;
}

std::vector<std::string> HolderBook::Holders(const BlockKey& key) const {
  MutexLock lock(&mu_);
  auto it = entries_.find(key);
  return it == entries_.end() ? std::vector<std::string>() : it->second.holders;
}

size_t HolderBook::blocks() const {
  MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace lakecache
