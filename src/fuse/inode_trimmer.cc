#include "fuse/inode_trimmer.h"

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace lakecache {
namespace {

// How often the held count is looked at. A round asks the kernel to forget at most a sixteenth of
// the budget (the kernel never forgets much more than the mount was over by, as the FORGETs of
// the last round may still be coming) and kMaxPerRound: 500k files/s, faster than a walk looks
// files up.
constexpr auto kPeriod = std::chrono::milliseconds(100);
constexpr size_t kMaxPerRound = 50'000;
// A round whose files mostly had no dentry waits twice as long as the last, up to this.
constexpr auto kMaxBackoff = std::chrono::seconds(10);
constexpr size_t kBatch = 4096;  // files named per call of FilesToRelease

}  // namespace

InodeTrimmer::InodeTrimmer(fuse_session* session, FileSystem* fs, uint64_t budget,
                           metrics::Registry* metrics)
    : session_(session), fs_(fs), budget_(budget) {
  if (metrics != nullptr) {
    released_ = metrics->GetCounter(
        "lakecache_mount_inodes_released_total",
        "Held files the mount asked the kernel to forget, over its client.kernel_inodes budget");
    refused_ = metrics->GetCounter(
        "lakecache_mount_inodes_release_refused_total",
        "Held files the mount asked the kernel to forget and it had no dentry of (an open file's "
        "whose dentry went, or one it was forgetting)");
  }
  thread_ = std::thread([this] { Run(); });
}

InodeTrimmer::~InodeTrimmer() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  wake_.SignalAll();
  thread_.join();
}

void InodeTrimmer::Run() {
  auto wait = std::chrono::duration_cast<std::chrono::steady_clock::duration>(kPeriod);
  bool warned = false;
  while (true) {
    {
      MutexLock lock(&mu_);
      const auto deadline = std::chrono::steady_clock::now() + wait;
      while (!stop_ && wake_.WaitUntil(&mu_, deadline)) {
      }
      if (stop_) return;
    }
    const Round round = Trim();
    if (round.asked == 0 || round.gone * 2 < round.asked) {
      wait = kPeriod;
      continue;
    }
    // Most files asked for had no dentry left yet are held: this kernel keeps inodes past their
    // dentries, or they are open. Asking again would only cost: wait longer.
    wait = std::min<std::chrono::steady_clock::duration>(wait * 2, kMaxBackoff);
    if (wait == kMaxBackoff && !warned) {
      warned = true;
      spdlog::warn(
          "the kernel keeps the inodes of files whose dentries it dropped: the mount "
          "holds {} inodes, over its client.kernel_inodes budget of {}",
          fs_->held_inodes(), budget_);
    }
  }
}

InodeTrimmer::Round InodeTrimmer::Trim() {
  Round round;
  const size_t held = fs_->held_inodes();
  const size_t target = budget_ - budget_ / 16;
  if (held <= target) return round;
  size_t left = std::min<size_t>({held - target, std::max<size_t>(budget_ / 16, 1), kMaxPerRound});
  while (left > 0) {
    {
      MutexLock lock(&mu_);
      if (stop_) return round;
    }
    std::vector<HeldInodes::Releasable> files = fs_->HeldFilesToRelease(std::min(left, kBatch));
    if (files.empty()) return round;  // only folders and files held since a restart
    for (const HeldInodes::Releasable& f : files) {
      int rc = fuse_lowlevel_notify_inval_entry(session_, f.parent, f.name.data(), f.name.size());
      if (rc != 0 && rc != -ENOENT) {
        // Before the kernel's INIT (-ENOSYS), or the connection is gone: the next round retries.
        spdlog::debug("asking the kernel to forget {}: {}", f.name, std::strerror(-rc));
        return round;
      }
      ++round.asked;
      released_.Add();
      if (rc == -ENOENT) {
        ++round.gone;
        refused_.Add();
      }
    }
    left -= std::min(left, files.size());
  }
  return round;
}

}  // namespace lakecache
