// InodeTable: the inodes of a mount, by namespace and path (fs/held_inodes.h underneath).
//
// A path's number is a function of its namespace and path: the same whenever it is looked up,
// before and after the kernel forgot it, and after a restart. Only the inodes the kernel holds
// take memory (an entry each, freed when the kernel forgets its last lookup). Inode 1 is the root.
// Thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "fs/held_inodes.h"

namespace lakecache {

struct Namespace;

struct InodeInfo {
  Namespace* ns = nullptr;  // nullptr only for the root of a multi-namespace mount
  std::string path;         // relative to the namespace root; "" for its root
  bool is_dir = false;
};

class InodeTable {
 public:
  static constexpr uint64_t kRootIno = HeldInodes::kRootIno;

  // `root` describes inode 1.
  explicit InodeTable(InodeInfo root);

  // The kernel is given (ns, path) once more (a lookup, a create): its entry counts one more
  // lookup, made on first sight. A path that turned from file to folder (or back) keeps its
  // number; its type is updated. *changed (when given) says whether the table changed: a new
  // entry, or a new type.
  uint64_t Acquire(Namespace* ns, const std::string& path, bool is_dir, bool* changed = nullptr);
  // The number of (ns, path), holding nothing (a listing's entries).
  uint64_t NumberOf(Namespace* ns, const std::string& path) const;
  // Acquire and NumberOf of an entry of held folder `parent` (fs/held_inodes.h): one probe.
  uint64_t AcquireChild(uint64_t parent, Namespace* ns, std::string_view path, bool is_dir,
                        bool* changed);
  uint64_t NumberOfChild(uint64_t parent, Namespace* ns, std::string_view path) const;
  // The kernel forgot `count` lookups of `ino`; true when its entry went.
  bool Forget(uint64_t ino, uint64_t count);
  // Gives `ino` to (ns, path), as a previous server of the mount had (MountJournal).
  void Restore(uint64_t ino, Namespace* ns, const std::string& path, bool is_dir);
  // A rename: the inode of (ns, from) names (ns, to) now, as the kernel's does. Returns that
  // inode, or 0 when `from` is not held.
  uint64_t Move(Namespace* ns, const std::string& from, const std::string& to);

  std::optional<InodeInfo> Get(uint64_t ino) const;
  // Held files for the kernel to forget (HeldInodes::FilesToRelease).
  std::vector<HeldInodes::Releasable> FilesToRelease(size_t n) const {
    return held_.FilesToRelease(n);
  }
  size_t held() const { return held_.size(); }
  size_t held_bytes() const { return held_.bytes(); }

 private:
  // The namespace's index in the held table (1 on), registered on first sight; 0 for nullptr.
  uint32_t IndexOf(Namespace* ns) const EXCLUDES(mu_);

  mutable Mutex mu_;
  mutable std::vector<Namespace*> namespaces_ GUARDED_BY(mu_);  // index - 1
  HeldInodes held_;
};

}  // namespace lakecache
