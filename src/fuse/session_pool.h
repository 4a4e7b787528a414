// SessionPool: one pool of threads over every descriptor of a FUSE connection (a libfuse session
// each), grown as libfuse's multi-threaded loop grows its own: a thread is started when none is
// left waiting for a request (a FORGET, which is never answered, does not count), up to
// `max_threads`, and none is ended. The kernel hands each request to the thread that has waited
// longest, whatever descriptor it waits on, so a shared count keeps a one-request-at-a-time walk
// on the same two warm threads as a single session does; a pool per descriptor would pass it round
// all of theirs. New threads wait on the descriptors in turn, each answering on the descriptor it
// read from. Internal to lakecache_fuse (FuseMount runs one).
#pragma once

#include <pthread.h>

#include <atomic>
#include <vector>

#include "common/mutex.h"

struct fuse_session;

namespace lakecache {

class SessionPool {
 public:
  SessionPool(std::vector<fuse_session*> sessions, unsigned max_threads);

  // Serves until a session ends (unmounted, or the first by libfuse's signal handler) or `stop`
  // is set, then ends every thread. `wake_fd` (an eventfd) is written whenever `stop` is set; Run
  // writes it too when a thread ends or a signal comes, and waits on it.
  void Run(const std::atomic<bool>& stop, int wake_fd);

 private:
  struct Worker {
    SessionPool* pool;
    fuse_session* se;
  };

  static void* Loop(void* arg);
  void StartLocked() REQUIRES(mu_);
  bool Ended(const std::atomic<bool>& stop) const;
  void Wake() const;

  const std::vector<fuse_session*> sessions_;
  const unsigned max_threads_;
  int wake_fd_ = -1;
  Mutex mu_;
  std::vector<pthread_t> threads_ GUARDED_BY(mu_);
  unsigned waiting_ GUARDED_BY(mu_) = 0;  // threads not serving a request
  bool exiting_ GUARDED_BY(mu_) = false;
  std::atomic<bool> ended_{false};
};

}  // namespace lakecache
