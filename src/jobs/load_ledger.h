// LoadLedger: what a load keeps of its tree once listed, so that it can check every block again
// (after a worker failed, and at the end) and report per file without holding the tree: one byte
// per block (its outcome), each folder's listing (the one the MetadataCache pinned, shared), and
// the reasons of failed blocks (at most `max_reasons`; later ones share the last reason seen).
// The files of a folder are its listing's non-folder entries, in order (TreeVisitor::OnFolder).
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "jobs/load_job.h"
#include "jobs/tree_walk.h"

namespace lakecache {

class LoadLedger {
 public:
  // Where a file's blocks are recorded.
  struct Slot {
    uint64_t folder = 0;
    uint64_t first = 0;  // its first block among its folder's
  };

  LoadLedger(uint64_t block_size, size_t max_reasons)
      : block_size_(block_size), max_reasons_(max_reasons) {}

  // Room for a file the walk handed out. REQUIRES: a folder's files come in index order.
  Slot AddFile(const TreeFile& file) EXCLUDES(mu_);
  // Folder `folder` is listed whole: its files are `listing`'s.
  void AddFolder(uint64_t folder, const std::string& dir, std::shared_ptr<const DirListing> listing)
      EXCLUDES(mu_);

  // Block `block` of the file at `slot` has `outcome`. In a `later_pass` it is combined with the
  // earlier one: a block found cached keeps what was said of it before (loaded, if it had failed),
  // and one that failed again keeps its first reason.
  void Record(const Slot& slot, uint64_t block, const BlockOutcome& outcome, bool later_pass)
      EXCLUDES(mu_);

  // Every file, folder by folder in walk order; stops at the first false. `fn` may block on work
  // that calls Record.
  using FileFn = std::function<bool(const std::string& path, const DirEntry& entry, Slot slot)>;
  void ForEachFile(const FileFn& fn) const EXCLUDES(mu_);

  // Files and bytes per outcome, and up to `max_failures` failed files with a reason, into `p`.
  // Files with a block without an outcome (a cancelled job) count nowhere.
  void Tally(size_t max_failures, LoadProgress* p) const EXCLUDES(mu_);

 private:
  struct Folder {
    std::string dir;
    std::shared_ptr<const DirListing> listing;  // once listed whole
    std::vector<TreeFile> files;                // a file walked alone (TreeFile::kNoFolder)
    std::vector<uint8_t> states;                // BlockState per block of its files, in order
  };
  uint64_t BlockCount(uint64_t size) const;
  void SetReason(const Slot& slot, uint64_t block, const std::string& reason) REQUIRES(mu_);
  std::string ReasonOf(const Slot& slot, uint64_t block) const REQUIRES(mu_);

  const uint64_t block_size_;
  const size_t max_reasons_;
  mutable Mutex mu_;
  std::map<uint64_t, Folder> folders_ GUARDED_BY(mu_);
  // Keyed by folder, then block index in the folder.
  std::map<std::pair<uint64_t, uint64_t>, std::string> reasons_ GUARDED_BY(mu_);
  std::string overflow_reason_ GUARDED_BY(mu_);
};

}  // namespace lakecache
