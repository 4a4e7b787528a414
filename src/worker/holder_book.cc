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

std::optional<std::string> HolderBook::Route(const BlockKey& key, const std::string& requester) {
  MutexLock lock(&mu_);
  Entry& entry = Touch(key);
  const std::string* from = nullptr;  // null: the owner
  const bool again =
      std::find(entry.holders.begin(), entry.holders.end(), requester) != entry.holders.end();
  if (!again) {
    // The fewest sent to lately, the owner first among equals (it has the block whole).
    uint64_t fewest = sent_to_[""];
    for (const std::string& holder : entry.holders) {
      if (const uint64_t sent = sent_to_[holder]; sent < fewest) {
        fewest = sent;
        from = &holder;
      }
    }
  }
  std::optional<std::string> routed;
  if (from != nullptr) routed = *from;
  ++sent_to_[routed.value_or("")];
  if (++routes_ >= std::max<uint64_t>(options_.halve_every, 1)) {
    routes_ = 0;
    for (auto& [worker, sent] : sent_to_) sent /= 2;
    std::erase_if(sent_to_, [](const auto& count) { return count.second == 0; });
  }
  AddHolder(entry, requester);
  return routed;
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
}

void HolderBook::Note(const BlockKey& key, const std::string& holder) {
  MutexLock lock(&mu_);
  ++sent_to_[""];  // the owner served it
  AddHolder(Touch(key), holder);
}

void HolderBook::Drop(const BlockKey& key, const std::string& holder) {
  MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  std::erase(it->second.holders, holder);
}

void HolderBook::DropWorker(const std::string& worker) {
  MutexLock lock(&mu_);
  for (auto& [key, entry] : entries_) std::erase(entry.holders, worker);
  sent_to_.erase(worker);
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
