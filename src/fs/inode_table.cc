#include "fs/inode_table.h"

namespace lakecache {

InodeTable::InodeTable(InodeInfo root) {
  inodes_.push_back(root);
  by_key_[KeyOf(root.ns, root.path)] = kRootIno;
}

std::string InodeTable::KeyOf(const Namespace* ns, const std::string& path) {
  // The namespace's address keeps keys of different namespaces apart; '\0' cannot be in a path.
  std::string key = std::to_string(reinterpret_cast<uintptr_t>(ns));
  key.push_back('\0');
  key += path;
  return key;
}

uint64_t InodeTable::Assign(Namespace* ns, const std::string& path, bool is_dir, bool* changed) {
  std::string key = KeyOf(ns, path);
  if (changed != nullptr) *changed = false;
  {
    ReaderMutexLock lock(&mu_);
    auto it = by_key_.find(key);
    if (it != by_key_.end() && inodes_[it->second - 1].is_dir == is_dir) return it->second;
  }
  WriterMutexLock lock(&mu_);
  auto [it, inserted] = by_key_.try_emplace(key, inodes_.size() + 1);
  InodeInfo& info =
      inserted ? inodes_.emplace_back(InodeInfo{ns, path, is_dir}) : inodes_[it->second - 1];
  if (changed != nullptr) *changed = inserted || info.is_dir != is_dir;
  info.is_dir = is_dir;
  return it->second;
}

void InodeTable::Restore(uint64_t ino, Namespace* ns, const std::string& path, bool is_dir) {
  if (ino == 0) return;
  WriterMutexLock lock(&mu_);
  if (ino > inodes_.size()) inodes_.resize(ino);  // gaps (unknown numbers) stay empty
  // A later record of the same inode (a rename) takes its old name from it.
  InodeInfo& info = inodes_[ino - 1];
  if (auto old = by_key_.find(KeyOf(info.ns, info.path));
      old != by_key_.end() && old->second == ino) {
    by_key_.erase(old);
  }
  info = InodeInfo{ns, path, is_dir};
  by_key_[KeyOf(ns, path)] = ino;
}

uint64_t InodeTable::Move(Namespace* ns, const std::string& from, const std::string& to) {
  WriterMutexLock lock(&mu_);
  auto it = by_key_.find(KeyOf(ns, from));
  if (it == by_key_.end()) return 0;
  uint64_t ino = it->second;
  by_key_.erase(it);
  by_key_[KeyOf(ns, to)] = ino;
  inodes_[ino - 1].path = to;
  return ino;
}

std::optional<InodeInfo> InodeTable::Get(uint64_t ino) const {
  ReaderMutexLock lock(&mu_);
  if (ino == 0 || ino > inodes_.size()) return std::nullopt;
  return inodes_[ino - 1];
}

}  // namespace lakecache
