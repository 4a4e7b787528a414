#include "fs/inode_table.h"

#include <algorithm>

namespace lakecache {

InodeTable::InodeTable(InodeInfo root) : held_(IndexOf(root.ns)) {}

uint32_t InodeTable::IndexOf(Namespace* ns) const {
  if (ns == nullptr) return 0;
  MutexLock lock(&mu_);
  auto it = std::find(namespaces_.begin(), namespaces_.end(), ns);
  if (it == namespaces_.end()) it = namespaces_.insert(namespaces_.end(), ns);
  return static_cast<uint32_t>(it - namespaces_.begin()) + 1;
}

uint64_t InodeTable::Acquire(Namespace* ns, const std::string& path, bool is_dir, bool* changed) {
  return held_.Acquire(IndexOf(ns), path, is_dir, changed);
}

uint64_t InodeTable::NumberOf(Namespace* ns, const std::string& path) const {
  return held_.NumberOf(IndexOf(ns), path);
}

uint64_t InodeTable::AcquireChild(uint64_t parent, Namespace* ns, std::string_view path,
                                  bool is_dir, bool* changed) {
  return held_.AcquireChild(parent, IndexOf(ns), path, is_dir, changed);
}

uint64_t InodeTable::NumberOfChild(uint64_t parent, Namespace* ns, std::string_view path) const {
  return held_.NumberOfChild(parent, IndexOf(ns), path);
}

bool InodeTable::Forget(uint64_t ino, uint64_t count) { return held_.Forget(ino, count); }

void InodeTable::Restore(uint64_t ino, Namespace* ns, const std::string& path, bool is_dir) {
  held_.Restore(ino, IndexOf(ns), path, is_dir);
}

uint64_t InodeTable::Move(Namespace* ns, const std::string& from, const std::string& to) {
  return held_.Move(IndexOf(ns), from, to);
}

std::optional<InodeInfo> InodeTable::Get(uint64_t ino) const {
  std::optional<HeldInodes::Info> info = held_.Get(ino);
  if (!info) return std::nullopt;
  Namespace* ns = nullptr;
  if (info->ns != 0) {
    MutexLock lock(&mu_);
    if (info->ns > namespaces_.size()) return std::nullopt;
    ns = namespaces_[info->ns - 1];
  }
  return InodeInfo{ns, std::move(info->path), info->is_dir};
}

}  // namespace lakecache
