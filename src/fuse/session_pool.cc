#define FUSE_USE_VERSION 312
#include "fuse/session_pool.h"

#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace lakecache {
namespace {

// The signals libfuse's handler ends the session on (fuse_set_signal_handlers). While a pool runs
// they also wake it: the handler runs on whichever thread the kernel picks, and the pool's own
// thread must then see that the session has ended.
constexpr std::array<int, 3> kEndSignals = {SIGTERM, SIGINT, SIGHUP};
std::array<struct sigaction, kEndSignals.size()> g_chained{};
std::atomic<int> g_signal_wake_fd{-1};

void WakeOnSignal(int sig) {
  int saved_errno = errno;
  for (size_t i = 0; i < kEndSignals.size(); ++i) {
    if (kEndSignals[i] == sig) g_chained[i].sa_handler(sig);
  }
  int fd = g_signal_wake_fd.load();
  uint64_t one = 1;
  if (fd >= 0) (void)!::write(fd, &one, sizeof(one));
  errno = saved_errno;
}

// Puts WakeOnSignal in front of the handlers libfuse installed (one FuseMount per process: one
// pool at a time); a signal with another disposition is left as it is.
class SignalWake {
 public:
  explicit SignalWake(int wake_fd) {
    g_signal_wake_fd = wake_fd;
    for (size_t i = 0; i < kEndSignals.size(); ++i) {
      struct sigaction current {};
      ::sigaction(kEndSignals[i], nullptr, &current);
      bool plain_function = (current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler != SIG_DFL &&
                            current.sa_handler != SIG_IGN;
      if (!plain_function) continue;
      g_chained[i] = current;
      struct sigaction wake = current;
      wake.sa_handler = WakeOnSignal;
      installed_[i] = ::sigaction(kEndSignals[i], &wake, nullptr) == 0;
    }
  }
  ~SignalWake() {
    for (size_t i = 0; i < kEndSignals.size(); ++i) {
      if (installed_[i]) ::sigaction(kEndSignals[i], &g_chained[i], nullptr);
    }
    g_signal_wake_fd = -1;
  }
  SignalWake(const SignalWake&) = delete;
  SignalWake& operator=(const SignalWake&) = delete;

 private:
  std::array<bool, kEndSignals.size()> installed_{};
};

}  // namespace

SessionPool::SessionPool(std::vector<fuse_session*> sessions, unsigned max_threads)
    : sessions_(std::move(sessions)), max_threads_(std::max(1u, max_threads)) {}

void SessionPool::Wake() const {
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
}

bool SessionPool::Ended(const std::atomic<bool>& stop) const {
  return ended_ || stop || fuse_session_exited(sessions_.front());
}

void SessionPool::Run(const std::atomic<bool>& stop, int wake_fd) {
  wake_fd_ = wake_fd;
  {
    SignalWake signal_wake(wake_fd);
    {
      MutexLock lock(&mu_);
      StartLocked();
    }
    while (!Ended(stop)) {
      pollfd p{wake_fd, POLLIN, 0};
      if (::poll(&p, 1, -1) > 0) {
        uint64_t count = 0;
        (void)!::read(wake_fd, &count, sizeof(count));
      }
    }
  }
  for (fuse_session* se : sessions_) fuse_session_exit(se);
  std::vector<pthread_t> threads;
  {
    MutexLock lock(&mu_);
    exiting_ = true;  // no thread starts after this
    threads = threads_;
  }
  // A thread blocked reading the device wakes by a signal (the handler only ends the session).
  for (pthread_t t : threads) pthread_kill(t, SIGTERM);
  for (pthread_t t : threads) pthread_join(t, nullptr);
}

void* SessionPool::Loop(void* arg) {
  std::unique_ptr<Worker> worker(static_cast<Worker*>(arg));
  SessionPool& pool = *worker->pool;
  fuse_session* se = worker->se;
  fuse_buf buf;
  std::memset(&buf, 0, sizeof(buf));
  while (!fuse_session_exited(se)) {
    int res = fuse_session_receive_buf(se, &buf);
    if (res == -EINTR || res == -EAGAIN) {
      if (res == -EINTR) pool.Wake();  // a signal: Run looks whether the connection's session ended
      continue;
    }
    if (res <= 0) break;  // 0: unmounted, the session has ended
    bool forget = false;
    if ((buf.flags & FUSE_BUF_IS_FD) == 0 && buf.size >= sizeof(fuse_in_header)) {
      uint32_t opcode = static_cast<const fuse_in_header*>(buf.mem)->opcode;
      forget = opcode == FUSE_FORGET || opcode == FUSE_BATCH_FORGET;
    }
    if (!forget) {
      MutexLock lock(&pool.mu_);
      if (--pool.waiting_ == 0) pool.StartLocked();
    }
    fuse_session_process_buf(se, &buf);
    if (!forget) {
      MutexLock lock(&pool.mu_);
      ++pool.waiting_;
    }
  }
  std::free(buf.mem);
  pool.ended_ = true;
  pool.Wake();
  return nullptr;
}

void SessionPool::StartLocked() {
  if (exiting_ || threads_.size() >= max_threads_) return;
  auto* worker = new Worker{this, sessions_[threads_.size() % sessions_.size()]};
  pthread_t thread;
  if (pthread_create(&thread, nullptr, &SessionPool::Loop, worker) != 0) {
    delete worker;
    return;
  }
  threads_.push_back(thread);
  ++waiting_;
}

}  // namespace lakecache
