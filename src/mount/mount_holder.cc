#include "mount/mount_holder.h"

#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "common/scoped_fd.h"
#include "mount/holder_wire.h"
#include "mount/mount_admin.h"
#include "mount/server_process.h"
#include "rpc/unix_socket.h"

namespace lakecache {
namespace {

using Clock = std::chrono::steady_clock;
// How long the servers have to exit once the holder has unmounted, before they are killed.
constexpr auto kServersExitWait = std::chrono::seconds(10);

// The holder's state; one thread, one poll loop.
class Holder {
 public:
  explicit Holder(const MountHolderOptions& options) : options_(options) {}
  Status Run();

 private:
  struct Peer {
    ScopedFd socket;
    pid_t pid = 0;
    bool hello = false;
    bool serving = false;
    bool takeover_client = false;
  };

  Status Listen();
  // Signals arrive on a descriptor (SIGCHLD among them); Shutdown sets the mask back.
  void WatchSignals();
  // One turn of the loop: waits for what comes next and handles it.
  Status PollOnce();
  void OnSignals();
  void ReadPeer(int fd);
  void KillSlowDrain();
  void Shutdown();
  void WaitForServers();
  void Accept();
  void OnMessage(int fd, HolderMessage message, std::vector<ScopedFd> fds);
  void OnHello(int fd, const HolderMessage& message);
  void OnTakeover(int fd, const HolderMessage& message);
  void OnGone(int fd);
  void OnChildExit(pid_t pid, int status);
  void Welcome(int fd);
  void Refuse(int fd, const std::string& error);
  Result<pid_t> StartServer(const std::string& exe);
  void EndTakeover(const std::string& error);
  bool Supervising() const { return !options_.server_argv.empty(); }
  void End(Status why);
  void Drop(int fd);
  void MaybeRestart();

  const MountHolderOptions& options_;
  ScopedFd listen_fd_;
  ScopedFd journal_fd_;
  ScopedFd signal_fd_;
  sigset_t old_mask_{};
  bool unmounted_ = false;  // by someone else
  std::unique_ptr<HeldConnection> conn_;
  std::string mountpoint_, fuse_options_, init_;
  std::map<int, Peer> peers_;  // by socket (Peer::socket), which the peer owns
  int current_ = -1;           // the serving server's socket
  int successor_ = -1;         // a server waiting for the current one to go
  Clock::time_point stop_sent_{};
  pid_t stopping_pid_ = 0;
  std::set<pid_t> children_;
  std::set<pid_t> told_to_stop_;
  std::string exe_;  // what a supervised server runs
  // A takeover in progress: the client waiting, the new server's pid and executable.
  int takeover_client_ = -1;
  pid_t takeover_pid_ = 0;
  std::string takeover_exe_;
  int failed_starts_ = 0;
  bool served_ = false;  // a server has served
  std::optional<Clock::time_point> restart_at_;
  std::optional<Status> end_;

 public:
  int server_exit_ = -1;  // the exit code of a server whose exit ended the holder
};

Status Holder::Listen() {
  LC_ASSIGN_OR_RETURN(listen_fd_, ListenAsHolder(options_.socket_path));
  return Status::Ok();
}

void Holder::Accept() {
  ScopedFd socket(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!socket.valid()) return;
  int fd = socket.get();
  Result<uid_t> uid = rpc::PeerUid(fd);
  if (!uid.ok() || (*uid != 0 && *uid != ::geteuid())) {
    Refuse(fd, "only uid " + std::to_string(::geteuid()) + " and root may serve this mount");
    return;
  }
  ucred cred{};
  socklen_t len = sizeof(cred);
  ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len);
  Peer& peer = peers_[fd];
  peer.socket = std::move(socket);
  peer.pid = cred.pid;
}

void Holder::Refuse(int fd, const std::string& error) {
  spdlog::warn("holder: refused: {}", error);
  (void)SendHolderMessage(fd, {"refused", {{"error", error}}});
}

void Holder::Welcome(int fd) {
  std::vector<int> fds = {journal_fd_.get()};
  for (int f : conn_->fds()) fds.push_back(f);
  if (Status s = SendHolderMessage(fd, {"welcome", {{"init", init_}}}, fds); !s.ok()) {
    spdlog::warn("holder: could not hand the mount over: {}", s.message());
    Drop(fd);
    return;
  }
  current_ = fd;
  spdlog::info("holder: pid {} serves {}", peers_[fd].pid, mountpoint_);
}

void Holder::OnHello(int fd, const HolderMessage& m) {
  Peer& peer = peers_[fd];
  peer.hello = true;
  if (m.Get("version") != std::to_string(kHolderProtocol)) {
    Refuse(fd, "the server speaks holder protocol " + m.Get("version") + ", this holder " +
                   std::to_string(kHolderProtocol));
    return;
  }
  if (conn_ == nullptr) {
    int descriptors =
        std::clamp(std::atoi(m.Get("descriptors").c_str()), 1, static_cast<int>(kHolderMaxFds) - 1);
    Result<std::unique_ptr<HeldConnection>> conn =
        options_.mount(m.Get("mountpoint"), m.Get("options"), descriptors);
    if (!conn.ok()) {
      Refuse(fd, conn.status().message());
      return;
    }
    conn_ = std::move(*conn);
    mountpoint_ = m.Get("mountpoint");
    fuse_options_ = m.Get("options");
    spdlog::info("holder: mounted {} ({}; {} descriptors)", mountpoint_, fuse_options_,
                 conn_->fds().size());
    Welcome(fd);
    return;
  }
  if (m.Get("mountpoint") != mountpoint_) {
    Refuse(fd, "this holder keeps the mount at " + mountpoint_ + ", not " + m.Get("mountpoint"));
    return;
  }
  if (m.Get("options") != fuse_options_) {
    Refuse(fd, "cannot take the mount over: its FUSE settings differ (the mount's: " +
                   fuse_options_ + "; this server's: " + m.Get("options") + ")");
    return;
  }
  if (successor_ >= 0) {
    Refuse(fd, "another server is taking the mount over");
    return;
  }
  if (current_ < 0) {
    Welcome(fd);
    return;
  }
  successor_ = fd;
  stop_sent_ = Clock::now();
  stopping_pid_ = peers_[current_].pid;
  told_to_stop_.insert(stopping_pid_);
  spdlog::info("holder: pid {} takes over {}; telling pid {} to stop", peer.pid, mountpoint_,
               stopping_pid_);
  (void)SendHolderMessage(current_, {"stop", {{"successor", std::to_string(peer.pid)}}});
}

Result<pid_t> Holder::StartServer(const std::string& exe) {
  std::vector<std::string> argv = options_.server_argv;
  argv[0] = exe;
  Result<pid_t> pid = SpawnServer(argv);
  if (!pid.ok()) {
    spdlog::error("holder: cannot start the server: {}", pid.status().message());
    return pid;
  }
  children_.insert(*pid);
  spdlog::info("holder: started server pid {} ({})", *pid, exe);
  return pid;
}

void Holder::OnTakeover(int fd, const HolderMessage& m) {
  peers_[fd].takeover_client = true;
  if (!Supervising()) {
    Refuse(fd, "this holder starts no servers: start the new server with --holder " +
                   options_.socket_path + " and it takes the mount over");
    return;
  }
  if (takeover_client_ >= 0 || successor_ >= 0) {
    Refuse(fd, "another takeover is in progress");
    return;
  }
  if (current_ < 0 || !peers_[current_].serving) {
    Refuse(fd, "no server serves the mount now (it is starting): try again");
    return;
  }
  std::string exe = m.Get("exe");
  if (::access(exe.c_str(), X_OK) != 0) {
    Refuse(fd, "cannot run " + exe + ": " + std::strerror(errno));
    return;
  }
  takeover_client_ = fd;
  takeover_exe_ = exe;
  Result<pid_t> pid = StartServer(exe);
  if (!pid.ok()) {
    EndTakeover(pid.status().message());
    return;
  }
  takeover_pid_ = *pid;
}

void Holder::EndTakeover(const std::string& error) {
  if (takeover_client_ >= 0) {
    if (error.empty()) {
      double pause = std::chrono::duration<double>(Clock::now() - stop_sent_).count();
      (void)SendHolderMessage(takeover_client_,
                              {"taken",
                               {{"pid", std::to_string(takeover_pid_)},
                                {"pause_ms", std::to_string(static_cast<int>(pause * 1000))}}});
    } else {
      Refuse(takeover_client_, error);
    }
  }
  if (error.empty()) exe_ = takeover_exe_;
  takeover_client_ = -1;
  takeover_pid_ = 0;
  takeover_exe_.clear();
}

void Holder::OnMessage(int fd, HolderMessage m, std::vector<ScopedFd> fds) {
  Peer& peer = peers_[fd];
  if (m.type == "hello") {
    OnHello(fd, m);
  } else if (m.type == "takeover") {
    OnTakeover(fd, m);
  } else if (m.type == "init" && fd == current_) {
    if (init_.empty()) init_ = m.Get("init");
  } else if (m.type == "serving" && fd == current_) {
    peer.serving = true;
    failed_starts_ = 0;
    if (!served_) {
      served_ = true;
      if (options_.on_serving) options_.on_serving();
    }
    if (takeover_pid_ != 0 && peer.pid == takeover_pid_) EndTakeover("");
  } else if (m.type == "journal" && fd == current_ && fds.size() == 1) {
    journal_fd_ = std::move(fds[0]);
  } else {
    spdlog::warn("holder: unexpected '{}' from pid {}", m.type, peer.pid);
  }
}

void Holder::Drop(int fd) {
  peers_.erase(fd);  // closes it
  if (fd == takeover_client_) takeover_client_ = -1;
  OnGone(fd);
}

void Holder::OnGone(int fd) {
  if (fd == successor_) {
    successor_ = -1;
    spdlog::warn("holder: the server taking the mount over went away");
  }
  if (fd != current_) return;
  current_ = -1;
  stopping_pid_ = 0;
  if (successor_ >= 0) {
    int next = successor_;
    successor_ = -1;
    Welcome(next);
  }
}

void Holder::OnChildExit(pid_t pid, int status) {
  children_.erase(pid);
  bool told = told_to_stop_.erase(pid) > 0;
  std::string how = ExitText(status);
  if (pid == takeover_pid_) {
    spdlog::warn("holder: the new server pid {} {} before it served", pid, how);
    EndTakeover("the new server " + how + " before it served; the old one serves on");
    return;
  }
  if (told) {
    spdlog::info("holder: pid {} handed the mount over and {}", pid, how);
  } else if (WIFEXITED(status) && (WEXITSTATUS(status) == 0 || !served_)) {
    // By choice (SIGTERM, or unmounted), or the first server could not start: the mount ends.
    spdlog::info("holder: server pid {} {}", pid, how);
    server_exit_ = WEXITSTATUS(status);
    End(server_exit_ == 0 ? Status::Ok() : Status::Unavailable("the server " + how));
    return;
  } else {
    ++failed_starts_;
    spdlog::error("holder: server pid {} {} (failure {} of {} in a row)", pid, how, failed_starts_,
                  options_.max_failed_starts);
  }
}

void Holder::MaybeRestart() {
  if (!Supervising() || end_ || restart_at_ || current_ >= 0 || successor_ >= 0 ||
      !children_.empty()) {
    return;
  }
  if (failed_starts_ >= options_.max_failed_starts) {
    End(Status::Unavailable("the server died " + std::to_string(failed_starts_) +
                            " times in a row; the mount ends"));
    return;
  }
  int backoff_ms = failed_starts_ <= 1 ? 0 : std::min(5000, 100 << (failed_starts_ - 1));
  spdlog::info("holder: starting another server in {} ms", backoff_ms);
  restart_at_ = Clock::now() + std::chrono::milliseconds(backoff_ms);
}

void Holder::End(Status why) {
  if (!end_) end_ = std::move(why);
}

void Holder::WatchSignals() {
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&mask, sig);
  ::sigprocmask(SIG_BLOCK, &mask, &old_mask_);
  signal_fd_.reset(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
  ::signal(SIGPIPE, SIG_IGN);
}

Status Holder::Run() {
  LC_RETURN_IF_ERROR(Listen());
  journal_fd_.reset(::memfd_create("lakecache-mount-journal", MFD_CLOEXEC));
  if (!journal_fd_.valid()) {
    return Status::IoError(std::string("memfd_create: ") + std::strerror(errno));
  }
  WatchSignals();
  if (Supervising()) {
    exe_ = options_.server_argv[0];
    if (Result<pid_t> pid = StartServer(exe_); !pid.ok()) End(pid.status());
  }
  while (!end_) {
    if (Status s = PollOnce(); !s.ok()) End(s);
  }
  Shutdown();
  return *end_;
}

Status Holder::PollOnce() {
  std::vector<pollfd> polls = {{signal_fd_.get(), POLLIN, 0}, {listen_fd_.get(), POLLIN, 0}};
  // POLLERR: unmounted. Not while a server serves: every request queued on the connection wakes
  // whoever polls it, and this loop would wake with each (about 8% of the server's CPU on warm
  // reads). A server whose mount is gone exits, and its going brings the watch back.
  auto current = peers_.find(current_);
  bool watch_conn = conn_ != nullptr && (current == peers_.end() || !current->second.serving);
  if (watch_conn) polls.push_back({conn_->fd(), 0, 0});
  size_t first_peer = polls.size();
  for (const auto& [fd, peer] : peers_) polls.push_back({fd, POLLIN, 0});
  // Woken at least every second: a drain's deadline is checked then.
  int timeout = 1000;
  if (restart_at_) {
    timeout = static_cast<int>(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(*restart_at_ - Clock::now())
               .count()));
  }
  int rc = ::poll(polls.data(), polls.size(), timeout);
  if (rc < 0 && errno != EINTR) return Status::IoError(std::strerror(errno));
  if (polls[0].revents != 0) OnSignals();
  if (polls[1].revents != 0) Accept();
  if (watch_conn && (polls[2].revents & (POLLERR | POLLHUP)) != 0) {
    spdlog::info("holder: {} was unmounted", mountpoint_);
    unmounted_ = true;
    End(Status::Ok());
  }
  for (size_t i = first_peer; i < polls.size(); ++i) {
    if (polls[i].revents != 0) ReadPeer(polls[i].fd);
  }
  KillSlowDrain();
  MaybeRestart();
  if (restart_at_ && Clock::now() >= *restart_at_ && !end_) {
    restart_at_.reset();
    if (Result<pid_t> pid = StartServer(exe_); !pid.ok()) ++failed_starts_;
  }
  return Status::Ok();
}

void Holder::OnSignals() {
  signalfd_siginfo info;
  while (::read(signal_fd_.get(), &info, sizeof(info)) == sizeof(info)) {
    if (info.ssi_signo != SIGCHLD) {
      spdlog::info("holder: {}: unmounting {}", ::strsignal(info.ssi_signo), mountpoint_);
      End(Status::Ok());
    }
  }
  int status = 0;
  for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) OnChildExit(pid, status);
}

void Holder::ReadPeer(int fd) {
  std::vector<ScopedFd> fds;
  Result<HolderMessage> m = ReceiveHolderMessage(fd, &fds, std::chrono::milliseconds(0));
  if (!m.ok()) {
    if (m.status().code() != StatusCode::kDeadlineExceeded) Drop(fd);
    return;
  }
  OnMessage(fd, std::move(*m), std::move(fds));
}

void Holder::KillSlowDrain() {
  if (stopping_pid_ == 0 || Clock::now() - stop_sent_ <= options_.drain_timeout) return;
  spdlog::warn("holder: pid {} did not stop in {} ms: killing it", stopping_pid_,
               options_.drain_timeout.count());
  ::kill(stopping_pid_, SIGKILL);
  stopping_pid_ = 0;
}

// The end: unmount (the servers see it and exit), then wait for them.
void Holder::Shutdown() {
  if (conn_ != nullptr && !unmounted_) conn_->Unmount();
  conn_.reset();
  WaitForServers();
  peers_.clear();
  journal_fd_.reset();
  signal_fd_.reset();
  listen_fd_.reset();
  ::unlink(options_.socket_path.c_str());
  ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
}

// Each exit is a SIGCHLD on the signal descriptor: waited for there, until the deadline; the
// servers still running then are killed.
void Holder::WaitForServers() {
  auto deadline = Clock::now() + kServersExitWait;
  while (!children_.empty()) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      children_.erase(pid);
      continue;
    }
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    pollfd p{signal_fd_.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) > 0) {
      signalfd_siginfo info;
      while (::read(signal_fd_.get(), &info, sizeof(info)) == sizeof(info)) {
      }
    }
  }
  for (pid_t pid : children_) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
}

}  // namespace

std::string HolderSocketPath(const std::string& mountpoint) {
  std::string control = ControlSocketPath(mountpoint);
  return control.substr(0, control.size() - std::strlen(".sock")) + ".holder";
}

Status RunMountHolder(const MountHolderOptions& options, int* server_exit) {
  Holder holder(options);
  Status s = holder.Run();
  if (server_exit != nullptr) *server_exit = holder.server_exit_;
  return s;
}

}  // namespace lakecache
