#include "fuse/inode_trimmer.h"

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <spdlog/spdlog.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/mutex.h"

namespace lakecache {
namespace {

// How often the held count is looked at. A round asks the kernel to forget at most a sixteenth of
// the budget (the FORGETs of the last round may still be coming, so the kernel never forgets much
// more than the mount was over by), at least kMinPerRound (a small budget still keeps up with a
// walk) and at most kMaxPerRound (500k files/s, faster than a walk looks files up).
constexpr auto kPeriod = std::chrono::milliseconds(100);
constexpr size_t kMinPerRound = 1024;
constexpr size_t kMaxPerRound = 50'000;
// A round that found nothing to release, or whose files mostly had no dentry left, waits twice
// as long as the last, up to this.
constexpr auto kMaxBackoff = std::chrono::seconds(10);
constexpr size_t kBatch = 4096;  // files named per call of HeldFilesToRelease
// How long the destructor waits for a notification the kernel holds (see the header).
constexpr auto kStopWait = std::chrono::seconds(2);

// FUSE_NOTIFY_INVAL_ENTRY, written on the connection's descriptor: 0 or -errno (-ENOENT: the
// kernel has no such dentry). Written here rather than through libfuse so that a notification
// still waiting when the mount goes touches nothing of its session after.
int NotifyInvalEntry(int fd, uint64_t parent, const std::string& name) {
  fuse_notify_inval_entry_out out{};
  out.parent = parent;
  out.namelen = static_cast<uint32_t>(name.size());
  fuse_out_header header{};
  header.error = FUSE_NOTIFY_INVAL_ENTRY;
  header.len = static_cast<uint32_t>(sizeof(header) + sizeof(out) + name.size() + 1);
  iovec iov[] = {{&header, sizeof(header)},
                 {&out, sizeof(out)},
                 {const_cast<char*>(name.c_str()), name.size() + 1}};
  return ::writev(fd, iov, 3) < 0 ? -errno : 0;
}

}  // namespace

struct InodeTrimmer::State {
  fuse_session* session;
  int fd;
  FileSystem* fs;
  uint64_t budget;
  metrics::Counter released, refused;
  Mutex mu;
  CondVar wake, exited;
  bool stop GUARDED_BY(mu) = false;
  bool done GUARDED_BY(mu) = false;

  struct Round {
    bool over = false;  // the mount held more than 15/16 of the budget
    size_t asked = 0;   // files named to the kernel
    size_t gone = 0;    // of those, the ones it had no dentry of
  };

  void Run() {
    auto wait = std::chrono::duration_cast<std::chrono::steady_clock::duration>(kPeriod);
    bool warned = false;
    while (true) {
      {
        MutexLock lock(&mu);
        const auto deadline = std::chrono::steady_clock::now() + wait;
        while (!stop && wake.WaitUntil(&mu, deadline)) {
        }
        if (stop) return;
      }
      const Round round = Trim();
      if (!round.over || (round.asked > 0 && round.gone * 2 < round.asked)) {
        wait = kPeriod;
        continue;
      }
      // Nothing to release (only folders and files held since a restart), or most files asked
      // for had no dentry left yet are held (open, or a kernel that keeps inodes past their
      // dentries): asking again soon would only cost.
      wait = std::min<std::chrono::steady_clock::duration>(wait * 2, kMaxBackoff);
      if (round.asked > 0 && wait == kMaxBackoff && !warned) {
        warned = true;
        spdlog::warn(
            "the kernel keeps the inodes of files whose dentries it dropped: the mount holds more "
            "than its client.kernel_inodes budget of {}",
            budget);
      }
    }
  }

  // Asks the kernel to forget as many held files as the mount holds beyond 15/16 of the budget
  // (its count falls as the kernel's FORGETs come).
  Round Trim() {
    Round round;
    size_t left = 0;
    {
      MutexLock lock(&mu);
      const size_t held = fs->held_inodes();
      const size_t target = budget - budget / 16;
      if (stop || held <= target) return round;
      round.over = true;
      left = std::min(held - target, std::clamp<size_t>(budget / 16, kMinPerRound, kMaxPerRound));
    }
    while (left > 0) {
      std::vector<HeldInodes::Releasable> files;
      {
        MutexLock lock(&mu);
        if (stop) return round;
        files = fs->HeldFilesToRelease(std::min(left, kBatch));
      }
      for (const HeldInodes::Releasable& f : files) {
        {
          // The kernel takes the folder's lock: once the session stops reading requests, one in
          // that folder would never be answered.
          MutexLock lock(&mu);
          if (stop || fuse_session_exited(session)) return round;
        }
        const int rc = NotifyInvalEntry(fd, f.parent, f.name);
        MutexLock lock(&mu);
        if (stop) return round;  // the mount may be gone: nothing of it is touched
        if (rc != 0 && rc != -ENOENT) {
          // The connection is gone, or the kernel refuses: the next round tries again.
          spdlog::debug("asking the kernel to forget {}: {}", f.name, std::strerror(-rc));
          return round;
        }
        ++round.asked;
        (rc == 0 ? released : refused).Add();
        if (rc == -ENOENT) ++round.gone;
      }
      // Fewer than asked for: the table holds no more files to name this round.
      if (files.size() < std::min(left, kBatch)) return round;
      left -= files.size();
    }
    return round;
  }
};

InodeTrimmer::InodeTrimmer(fuse_session* session, FileSystem* fs, uint64_t budget,
                           metrics::Registry* metrics)
    : state_(std::make_shared<State>()) {
  state_->session = session;
  state_->fd = fuse_session_fd(session);
  state_->fs = fs;
  state_->budget = budget;
  if (metrics != nullptr) {
    state_->released = metrics->GetCounter(
        "lakecache_mount_inodes_released_total",
        "Held files the kernel dropped the dentry of when asked, over client.kernel_inodes");
    state_->refused = metrics->GetCounter(
        "lakecache_mount_inodes_release_refused_total",
        "Held files the mount asked the kernel to forget and it had no dentry of (an open file's "
        "whose dentry went, or one it was forgetting)");
  }
  std::thread([state = state_] {
    state->Run();
    MutexLock lock(&state->mu);
    state->done = true;
    state->exited.SignalAll();
  }).detach();
}

InodeTrimmer::~InodeTrimmer() {
  MutexLock lock(&state_->mu);
  state_->stop = true;
  state_->wake.SignalAll();
  const auto deadline = std::chrono::steady_clock::now() + kStopWait;
  while (!state_->done && state_->exited.WaitUntil(&state_->mu, deadline)) {
  }
  if (!state_->done) {
    spdlog::warn("the kernel still holds a request to forget a file; the mount goes on without it");
  }
}

}  // namespace lakecache
