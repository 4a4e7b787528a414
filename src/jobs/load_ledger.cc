#include "jobs/load_ledger.h"

#include <optional>

namespace lakecache {
namespace {

// Calls fn(path, entry, first block) for each file of a folder's record.
template <typename Folder, typename Fn>
bool ForFiles(const Folder& folder, uint64_t block_size, const Fn& fn) {
  uint64_t first = 0;
  auto visit = [&](const std::string& path, const DirEntry& entry) {
    bool more = fn(path, entry, first);
    first += ObjectSpec{"", "", entry.size, block_size}.blocks();
    return more;
  };
  for (const TreeFile& file : folder.files) {
    if (!visit(file.path, file.entry)) return false;
  }
  if (folder.listing == nullptr) return true;
  const DirListing& listing = *folder.listing;
  for (size_t i = 0; i < listing.size(); ++i) {
    if (listing.is_dir_at(i)) continue;
    DirEntry entry = listing.at(i);
    if (!visit(JoinPath(folder.dir, entry.name), entry)) return false;
  }
  return true;
}

}  // namespace

uint64_t LoadLedger::BlockCount(uint64_t size) const {
  return ObjectSpec{"", "", size, block_size_}.blocks();
}

LoadLedger::Slot LoadLedger::AddFile(const TreeFile& file) {
  MutexLock lock(&mu_);
  Folder& folder = folders_[file.folder];
  if (file.folder == TreeFile::kNoFolder) folder.files.push_back(file);
  Slot slot{file.folder, folder.states.size()};
  folder.states.resize(folder.states.size() + BlockCount(file.entry.size),
                       static_cast<uint8_t>(BlockState::kMissing));
  return slot;
}

void LoadLedger::AddFolder(uint64_t folder, const std::string& dir,
                           std::shared_ptr<const DirListing> listing) {
  MutexLock lock(&mu_);
  Folder& record = folders_[folder];
  record.dir = dir;
  record.listing = std::move(listing);
}

void LoadLedger::Record(const Slot& slot, uint64_t block, const BlockOutcome& outcome,
                        bool later_pass) {
  MutexLock lock(&mu_);
  auto found = folders_.find(slot.folder);
  if (found == folders_.end() || slot.first + block >= found->second.states.size()) return;
  uint8_t& state = found->second.states[slot.first + block];
  auto before = static_cast<BlockState>(state);
  BlockState now = outcome.state;
  if (later_pass && now == BlockState::kAlreadyCached) {
    if (before == BlockState::kFailed) {
      state = static_cast<uint8_t>(BlockState::kLoaded);
      reasons_.erase({slot.folder, slot.first + block});
    }
    return;
  }
  if (later_pass && now == BlockState::kFailed && before == BlockState::kFailed) return;
  state = static_cast<uint8_t>(now);
  if (now == BlockState::kFailed) {
    SetReason(slot, block, outcome.error);
  } else if (before == BlockState::kFailed) {
    reasons_.erase({slot.folder, slot.first + block});
  }
}

void LoadLedger::SetReason(const Slot& slot, uint64_t block, const std::string& reason) {
  std::pair<uint64_t, uint64_t> key{slot.folder, slot.first + block};
  if (reasons_.size() < max_reasons_ || reasons_.contains(key)) {
    reasons_[key] = reason;
  } else {
    overflow_reason_ = reason;
  }
}

std::string LoadLedger::ReasonOf(const Slot& slot, uint64_t block) const {
  auto found = reasons_.find({slot.folder, slot.first + block});
  return found != reasons_.end() ? found->second : overflow_reason_;
}

void LoadLedger::ForEachFile(const FileFn& fn) const {
  // A copy of the records without their states: `fn` runs without the lock.
  std::vector<std::pair<uint64_t, Folder>> folders;
  {
    MutexLock lock(&mu_);
    for (const auto& [id, folder] : folders_) {
      folders.emplace_back(id, Folder{folder.dir, folder.listing, folder.files, {}});
    }
  }
  for (const auto& entry_of_folders : folders) {
    const uint64_t id = entry_of_folders.first;  // named: lambdas cannot capture a binding
    const Folder& folder = entry_of_folders.second;
    bool more = ForFiles(folder, block_size_,
                         [&](const std::string& path, const DirEntry& entry, uint64_t first) {
                           return fn(path, entry, Slot{id, first});
                         });
    if (!more) return;
  }
}

void LoadLedger::Tally(size_t max_failures, LoadProgress* p) const {
  p->loaded = p->already_cached = p->failed = {};
  p->failures.clear();
  MutexLock lock(&mu_);
  for (const auto& entry_of_folders : folders_) {
    const uint64_t id = entry_of_folders.first;  // named: lambdas cannot capture a binding
    const Folder& folder = entry_of_folders.second;
    ForFiles(folder, block_size_,
             [&](const std::string& path, const DirEntry& entry, uint64_t first) {
               mu_.AssertHeld();  // Tally's, for this call
               ObjectSpec object{"", "", entry.size, block_size_};
               bool loaded = false, missing = false;
               std::optional<uint64_t> failed;  // the first failed block
               for (uint64_t b = 0; b < object.blocks(); ++b) {
                 auto state = first + b < folder.states.size()
                                  ? static_cast<BlockState>(folder.states[first + b])
                                  : BlockState::kMissing;
                 uint64_t length = BlockSpec{object, b}.length();
                 if (state == BlockState::kLoaded) {
                   loaded = true;
                   p->loaded.bytes += length;
                 } else if (state == BlockState::kAlreadyCached) {
                   p->already_cached.bytes += length;
                 } else if (state == BlockState::kFailed) {
                   if (!failed) failed = b;
                   p->failed.bytes += length;
                 } else {
                   missing = true;  // cancelled before this block
                 }
               }
               if (failed) {
                 ++p->failed.files;
                 if (p->failures.size() < max_failures) {
                   p->failures.push_back({path, ReasonOf(Slot{id, first}, *failed)});
                 }
               } else if (!missing) {
                 ++(loaded ? p->loaded : p->already_cached).files;
               }
               return true;
             });
  }
}

}  // namespace lakecache
