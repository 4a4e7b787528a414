// InodeTable: stable inode numbers for the paths a mount has shown.
//
// A path keeps its number for the life of the mount, also after the kernel forgets it, so a lookup
// after `drop_caches` gets the same inode. Numbers are never reused. Inode 1 is the root.
// Thread-safe (a reader-writer lock; lookups of known paths take the shared side).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"

namespace lakecache {

struct Namespace;

struct InodeInfo {
  Namespace* ns = nullptr;  // nullptr only for the root of a multi-namespace mount
  std::string path;         // relative to the namespace root; "" for its root
  bool is_dir = false;
};

class InodeTable {
 public:
  static constexpr uint64_t kRootIno = 1;

  // `root` describes inode 1.
  explicit InodeTable(InodeInfo root);

  // The inode for (ns, path), assigned on first sight. A path that turned from file to folder (or
  // back) keeps its number; its type is updated.
  // *changed (when given) says whether the table changed: a new inode, or a new type.
  uint64_t Assign(Namespace* ns, const std::string& path, bool is_dir, bool* changed = nullptr);
  // Gives `ino` to (ns, path), as a previous server of the mount had (MountJournal); numbers
  // assigned later follow the highest restored.
  void Restore(uint64_t ino, Namespace* ns, const std::string& path, bool is_dir);

  // A rename: the inode of (ns, from) names (ns, to) now, as the kernel's does, and `from` has
  // none. Returns that inode, or 0 when `from` had none.
  uint64_t Move(Namespace* ns, const std::string& from, const std::string& to);

  std::optional<InodeInfo> Get(uint64_t ino) const;

 private:
  static std::string KeyOf(const Namespace* ns, const std::string& path);

  mutable SharedMutex mu_;
  std::vector<InodeInfo> inodes_ GUARDED_BY(mu_);  // index = ino - 1
  std::unordered_map<std::string, uint64_t> by_key_ GUARDED_BY(mu_);
};

}  // namespace lakecache
