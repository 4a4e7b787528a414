// ReaddirplusPolicy: which entries of a folder a readdirplus reply gives with their attributes.
//
// An entry given with its attributes becomes an inode and a dentry the kernel holds: a later
// stat or open of it needs no lookup, but making it costs the kernel more than the listing itself
// (a find over 1M entries runs at ~250k files/s on a file system that computes its tree, against
// 1.4M when entries come bare), and the mount holds an inode for it until the kernel forgets it.
// The kernel's own "auto" mode asks readdirplus for a folder's first request, which now holds
// the whole folder (kernels since 6.16 size it to the reader's buffer), so it decides nothing.
//
// Adaptive (the default): entries past a folder's first kFirstEntries go bare (`ls -l` of a
// small folder needs no lookup) until lookups of files show that what is listed is being stat'ed
// or opened; then whole folders go with their attributes, but for one entry in kSample past the
// first ones, a probe: its lookup (or none) says whether stats still follow listings. After every
// kWindow bare entries the mode is decided again: whole folders when more than one lookup of a
// file came for every kLookupRatio bare entries. A readdirplus from past a folder's start comes
// when the kernel saw a lookup in the folder since its last request (its own advice): it is
// answered as in whole mode. Thread-safe, lock-free; a race only shifts a window.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/result.h"

namespace lakecache {

enum class ReaddirplusMode {
  kAdaptive,  // as above
  kAlways,    // every entry with its attributes (the kernel's auto mode, as it behaves since 6.16)
  kNever,     // the kernel is told not to ask readdirplus: every stat of a listed entry looks up
};

// "adaptive", "always", "never".
Result<ReaddirplusMode> ParseReaddirplusMode(std::string_view text);

class ReaddirplusPolicy {
 public:
  static constexpr uint64_t kFirstEntries = 128;
  static constexpr uint64_t kSample = 32;
  static constexpr uint64_t kWindow = 1024;
  static constexpr uint64_t kLookupRatio = 8;

  explicit ReaddirplusPolicy(ReaddirplusMode mode = ReaddirplusMode::kAdaptive) : mode_(mode) {}

  ReaddirplusMode mode() const { return mode_; }

  // Whether a readdirplus reply from entry `first` of its folder (0: the folder's start) is
  // answered in whole mode; read once per reply.
  bool Whole(uint64_t first) const { return first > 0 || whole_.load(std::memory_order_relaxed); }
  // Whether entry `entry` of a reply answered in `whole` mode goes with its attributes.
  bool WithAttributes(uint64_t entry, bool whole) const {
    if (mode_ != ReaddirplusMode::kAdaptive || entry < kFirstEntries) return true;
    return whole && entry % kSample != 0;
  }
  // `n` entries were sent bare (in a readdirplus reply, or by readdir).
  void SentBare(uint64_t n);
  // A lookup of a file was answered.
  void LookedUpFile() { lookups_.fetch_add(1, std::memory_order_relaxed); }

 private:
  const ReaddirplusMode mode_;
  std::atomic<bool> whole_{false};
  std::atomic<uint64_t> bare_{0};
  std::atomic<uint64_t> lookups_{0};
};

}  // namespace lakecache
