// HeldInodes: the inodes the kernel holds, in memory that follows the kernel's count, not the
// number of paths a mount ever showed.
//
// A path's inode number is a function of its namespace and path (a 60-bit hash, never 0 or 1), so
// it is the same whenever the path is looked up, before or after the kernel forgot it, and a
// listing names its entries' numbers without holding anything. Only the inodes the kernel holds
// (a lookup it was answered, not yet forgotten) have an entry: its number, its parent's, the
// kernel's lookup count, the entry's held children, and its name (inline up to kInlineName
// bytes). An entry holds its parent, so a held path can always be spelled. Two held paths whose
// hashes collide get the next free number: the second's number is then not its hash (stable for
// as long as it is held). A rename keeps the inode's number, as the kernel does.
//
// Thread-safe (a reader-writer lock).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"

namespace lakecache {

class HeldInodes {
 public:
  static constexpr uint64_t kRootIno = 1;
  static constexpr uint64_t kNumberBits = 60;  // numbers below 2^60 (callers use the rest)
  static constexpr size_t kInlineName = 20;

  struct Info {
    uint32_t ns = 0;   // the caller's namespace index; 0 for the root
    std::string path;  // relative to the namespace root; "" for it
    bool is_dir = false;
  };

  // Inode 1 is the root of namespace `root_ns` (0: the root of a multi-namespace mount, whose
  // namespaces' roots are (ns, "") below it).
  explicit HeldInodes(uint32_t root_ns = 0);
  ~HeldInodes();
  HeldInodes(const HeldInodes&) = delete;
  HeldInodes& operator=(const HeldInodes&) = delete;

  // The number (ns, path) has: a held entry's, else its hash (probing past held entries of other
  // paths). Holds nothing.
  uint64_t NumberOf(uint32_t ns, std::string_view path) const;
  // The kernel was given (ns, path) once more: its entry, made on first sight (with its parent's,
  // which it holds), counts one more lookup. A path that turned from file to folder keeps its
  // number. REQUIRES: a namespace root is acquired (or the path is one) before paths below it.
  // *changed (when given) says whether the table changed: a new entry, or a new type.
  uint64_t Acquire(uint32_t ns, std::string_view path, bool is_dir, bool* changed = nullptr);
  // Acquire of an entry of held folder `parent` (a listing's, sent by readdirplus): one probe
  // instead of one per component of `path` when `parent` is the folder `path` is in (it is
  // checked; a folder renamed since it was listed takes the path's way). *changed says whether
  // the table changed: a new entry, or a new type.
  uint64_t AcquireChild(uint64_t parent, uint32_t ns, std::string_view path, bool is_dir,
                        bool* changed);
  // NumberOf an entry of held folder `parent`.
  uint64_t NumberOfChild(uint64_t parent, uint32_t ns, std::string_view path) const;
  // An entry a previous server of the mount had (MountJournal), under the same number; the kernel's
  // count of it is unknown, so it is held until the mount ends (kRestoredLookups).
  void Restore(uint64_t ino, uint32_t ns, std::string_view path, bool is_dir);
  static constexpr uint32_t kRestoredLookups = 1u << 31;

  // The kernel forgot `count` lookups of `ino`; at 0 its entry goes (and its hold on its parent).
  // Returns true when the entry went. Unknown numbers are ignored.
  bool Forget(uint64_t ino, uint64_t count);
  // A rename: the held inode of `from` is named `to` now (and `to`'s own, if held, loses its
  // name: the kernel replaced it). Returns its number, or 0 when `from` is not held.
  uint64_t Move(uint32_t ns, std::string_view from, std::string_view to);

  // A held file to ask the kernel to forget: its folder's number and its name.
  struct Releasable {
    uint64_t parent = 0;
    std::string name;
  };
  // Up to `n` held files for the kernel to forget (fuse/inode_trimmer.h), in the table's order
  // from where the last call stopped, so that each call names others; fewer when the next 8n +
  // 1024 entries hold fewer. Never a folder (it goes when nothing below it is held) or a restored
  // entry (the kernel's count of it is unknown).
  std::vector<Releasable> FilesToRelease(size_t n) const;

  std::optional<Info> Get(uint64_t ino) const;
  size_t size() const;             // held entries, the root included
  size_t bytes() const;            // the table's memory, names beyond the inline bytes aside
  size_t bytes_per_entry() const;  // bytes() per held entry

 private:
  class Table;

 public:
  struct Entry;  // public for its size check

 private:
  uint64_t FindLocked(uint32_t ns, std::string_view path) const REQUIRES_SHARED(mu_);
  // The held entry of `path` if its parent is `parent`, else 0.
  uint64_t FindChildLocked(uint64_t parent, uint32_t ns, std::string_view path) const
      REQUIRES_SHARED(mu_);
  // Whether held `parent` is the folder `path` is in, judged by its namespace and name.
  bool IsParentLocked(uint64_t parent, uint32_t ns, std::string_view path) const
      REQUIRES_SHARED(mu_);
  // A new entry for (ns, path) under held folder `parent`.
  uint64_t InsertLocked(uint64_t parent, uint32_t ns, std::string_view path, bool is_dir,
                        uint32_t count) REQUIRES(mu_);
  // The first free number from (ns, path)'s hash on.
  uint64_t FreeNumberLocked(uint32_t ns, std::string_view path) const REQUIRES_SHARED(mu_);
  uint64_t AcquireLocked(uint32_t ns, std::string_view path, bool is_dir, uint32_t count,
                         bool* changed = nullptr) REQUIRES(mu_);
  // Held entry `held` counts `count` lookups more, of a file or a folder as `is_dir` says.
  uint64_t HoldLocked(uint64_t held, bool is_dir, uint32_t count, bool* changed) REQUIRES(mu_);
  void ReleaseLocked(uint64_t ino) REQUIRES(mu_);
  bool SpellLocked(uint64_t ino, std::string* path) const REQUIRES_SHARED(mu_);

  // Path -> number of the held entries whose number is not their path's hash (a collision, a
  // rename); namespace index first.
  static std::string AsideKey(uint32_t ns, std::string_view path);
  uint64_t HomeOf(uint32_t ns, std::string_view path) const;

  const uint32_t root_ns_;
  mutable SharedMutex mu_;
  std::unique_ptr<Table> table_ GUARDED_BY(mu_);
  std::unordered_map<std::string, uint64_t> aside_ GUARDED_BY(mu_);
  mutable size_t release_cursor_ GUARDED_BY(mu_) = 0;  // FilesToRelease's next position
};

}  // namespace lakecache
