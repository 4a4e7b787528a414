#include "mount/mount_holder.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "common/units.h"
#include "mount/mount_admin.h"
#include "rpc/unix_socket.h"

namespace lakecache {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxMessage = 64 << 10;
constexpr size_t kMaxFds = 64;

std::string Escape(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Unescape(std::string_view v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '\\' && i + 1 < v.size()) {
      out += v[i + 1] == 'n' ? '\n' : v[i + 1];
      ++i;
    } else {
      out += v[i];
    }
  }
  return out;
}

std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

std::string Unhex(std::string_view hex) {
  auto digit = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(digit(hex[i]) << 4 | digit(hex[i + 1]));
  }
  return out;
}

Status Send(int fd, const HolderMessage& message, std::span<const int> fds = {}) {
  std::string bytes = EncodeHolderMessage(message);
  std::string_view part = bytes;
  return rpc::SendWithFds(fd, std::span<const std::string_view>(&part, 1), fds);
}

// One message (and its descriptors); kUnavailable when the peer has gone, kDeadlineExceeded when
// none came in `wait` (negative: wait for ever).
Result<HolderMessage> Receive(int fd, std::vector<int>* fds, std::chrono::milliseconds wait) {
  if (wait.count() >= 0) {
    pollfd p{fd, POLLIN, 0};
    int rc = 0;
    do {
      rc = ::poll(&p, 1, static_cast<int>(wait.count()));
    } while (rc < 0 && errno == EINTR);
    if (rc == 0) return Status::DeadlineExceeded("no answer");
  }
  std::string buffer(kMaxMessage, '\0');
  iovec iov{buffer.data(), buffer.size()};
  LC_ASSIGN_OR_RETURN(rpc::ReceivedMessage got,
                      rpc::ReceiveWithFds(fd, std::span<iovec>(&iov, 1), kMaxFds));
  if (got.bytes == 0) return Status::Unavailable("the other end has gone");
  if (got.truncated) return Status::InvalidArgument("a message too long");
  if (fds != nullptr) {
    *fds = std::move(got.fds);
  } else {
    for (int f : got.fds) ::close(f);
  }
  buffer.resize(got.bytes);
  return DecodeHolderMessage(buffer);
}

void CloseFd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

Result<int> ConnectTo(const std::string& path) {
  LC_ASSIGN_OR_RETURN(sockaddr_un addr, rpc::UnixSocketAddress("holder socket", path));
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IoError(std::string("socket: ") + std::strerror(errno));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    ::close(fd);
    return Status::Unavailable("no holder answers at " + path + ": " + std::strerror(err));
  }
  return fd;
}

std::string ExitText(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           ::strsignal(WTERMSIG(status)) + ")";
  }
  return "ended";
}

// Starts `argv` as a child with the signals a holder blocks set back; only async-signal-safe
// calls between fork and exec.
Result<pid_t> Spawn(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return Status::IoError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::close_range(3, ~0U, 0);
    ::execv(args[0], args.data());
    constexpr char kMessage[] = "lakecache holder: cannot exec the server\n";
    [[maybe_unused]] ssize_t n = ::write(2, kMessage, sizeof(kMessage) - 1);
    ::_exit(127);
  }
  return pid;
}

// The holder's state; one thread, one poll loop.
class Holder {
 public:
  explicit Holder(const MountHolderOptions& options) : options_(options) {}
  Status Run();

 private:
  struct Peer {
    pid_t pid = 0;
    bool hello = false;
    bool serving = false;
    bool takeover_client = false;
  };

  Status Listen();
  void Accept();
  void OnMessage(int fd, HolderMessage message, std::vector<int> fds);
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
  int listen_fd_ = -1;
  int journal_fd_ = -1;
  std::unique_ptr<HeldConnection> conn_;
  std::string mountpoint_, fuse_options_, init_;
  std::map<int, Peer> peers_;  // by socket
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
  LC_ASSIGN_OR_RETURN(sockaddr_un addr,
                      rpc::UnixSocketAddress("holder socket", options_.socket_path));
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(options_.socket_path).parent_path(),
                                      ec);
  if (Result<int> live = ConnectTo(options_.socket_path); live.ok()) {
    ::close(*live);
    return Status::PreconditionFailed("a holder already listens at " + options_.socket_path);
  }
  ::unlink(options_.socket_path.c_str());
  listen_fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) return Status::IoError(std::string("socket: ") + std::strerror(errno));
  mode_t old = ::umask(077);
  int rc = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::umask(old);
  if (rc != 0 || ::listen(listen_fd_, 16) != 0) {
    return Status::IoError("cannot listen at " + options_.socket_path + ": " +
                           std::strerror(errno));
  }
  return Status::Ok();
}

void Holder::Accept() {
  int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return;
  Result<uid_t> uid = rpc::PeerUid(fd);
  if (!uid.ok() || (*uid != 0 && *uid != ::geteuid())) {
    Refuse(fd, "only uid " + std::to_string(::geteuid()) + " and root may serve this mount");
    ::close(fd);
    return;
  }
  ucred cred{};
  socklen_t len = sizeof(cred);
  ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len);
  peers_[fd].pid = cred.pid;
}

void Holder::Refuse(int fd, const std::string& error) {
  spdlog::warn("holder: refused: {}", error);
  (void)Send(fd, {"refused", {{"error", error}}});
}

void Holder::Welcome(int fd) {
  std::vector<int> fds = {journal_fd_};
  for (int f : conn_->fds()) fds.push_back(f);
  if (Status s = Send(fd, {"welcome", {{"init", init_}}}, fds); !s.ok()) {
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
        std::clamp(std::atoi(m.Get("descriptors").c_str()), 1, static_cast<int>(kMaxFds) - 1);
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
  (void)Send(current_, {"stop", {{"successor", std::to_string(peer.pid)}}});
}

Result<pid_t> Holder::StartServer(const std::string& exe) {
  std::vector<std::string> argv = options_.server_argv;
  argv[0] = exe;
  Result<pid_t> pid = Spawn(argv);
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
      (void)Send(takeover_client_,
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

void Holder::OnMessage(int fd, HolderMessage m, std::vector<int> fds) {
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
    CloseFd(&journal_fd_);
    journal_fd_ = fds[0];
    fds.clear();
  } else {
    spdlog::warn("holder: unexpected '{}' from pid {}", m.type, peer.pid);
  }
  for (int f : fds) ::close(f);
}

void Holder::Drop(int fd) {
  peers_.erase(fd);
  ::close(fd);
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

Status Holder::Run() {
  LC_RETURN_IF_ERROR(Listen());
  journal_fd_ = ::memfd_create("lakecache-mount-journal", MFD_CLOEXEC);
  if (journal_fd_ < 0) return Status::IoError(std::string("memfd_create: ") + std::strerror(errno));
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&mask, sig);
  sigset_t old_mask;
  ::sigprocmask(SIG_BLOCK, &mask, &old_mask);
  int sig_fd = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  ::signal(SIGPIPE, SIG_IGN);
  if (Supervising()) {
    exe_ = options_.server_argv[0];
    if (Result<pid_t> pid = StartServer(exe_); !pid.ok()) End(pid.status());
  }
  bool unmounted = false;
  while (!end_) {
    std::vector<pollfd> polls = {{sig_fd, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    // POLLERR: unmounted. Not while a server serves: every request queued on the connection wakes
    // whoever polls it, and this loop would wake with each (about 8% of the server's CPU on warm
    // reads). A server whose mount is gone exits, and its going brings the watch back.
    auto current = peers_.find(current_);
    bool watch_conn = conn_ != nullptr && (current == peers_.end() || !current->second.serving);
    if (watch_conn) polls.push_back({conn_->fd(), 0, 0});
    size_t first_peer = polls.size();
    for (const auto& [fd, peer] : peers_) polls.push_back({fd, POLLIN, 0});
    int timeout = 1000;
    if (restart_at_) {
      timeout = static_cast<int>(std::max<int64_t>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(*restart_at_ - Clock::now())
                 .count()));
    }
    int rc = ::poll(polls.data(), polls.size(), timeout);
    if (rc < 0 && errno != EINTR) break;
    if (polls[0].revents != 0) {
      signalfd_siginfo info;
      while (::read(sig_fd, &info, sizeof(info)) == sizeof(info)) {
        if (info.ssi_signo != SIGCHLD) {
          spdlog::info("holder: {}: unmounting {}", ::strsignal(info.ssi_signo), mountpoint_);
          End(Status::Ok());
        }
      }
      int status = 0;
      for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) OnChildExit(pid, status);
    }
    if (polls[1].revents != 0) Accept();
    if (watch_conn && (polls[2].revents & (POLLERR | POLLHUP)) != 0) {
      spdlog::info("holder: {} was unmounted", mountpoint_);
      unmounted = true;
      End(Status::Ok());
    }
    for (size_t i = first_peer; i < polls.size(); ++i) {
      if (polls[i].revents == 0) continue;
      int fd = polls[i].fd;
      std::vector<int> fds;
      Result<HolderMessage> m = Receive(fd, &fds, std::chrono::milliseconds(0));
      if (!m.ok()) {
        if (m.status().code() != StatusCode::kDeadlineExceeded) Drop(fd);
        continue;
      }
      OnMessage(fd, std::move(*m), std::move(fds));
    }
    if (stopping_pid_ != 0 && Clock::now() - stop_sent_ > options_.drain_timeout) {
      spdlog::warn("holder: pid {} did not stop in {} ms: killing it", stopping_pid_,
                   options_.drain_timeout.count());
      ::kill(stopping_pid_, SIGKILL);
      stopping_pid_ = 0;
    }
    MaybeRestart();
    if (restart_at_ && Clock::now() >= *restart_at_ && !end_) {
      restart_at_.reset();
      if (Result<pid_t> pid = StartServer(exe_); !pid.ok()) ++failed_starts_;
    }
  }
  // The end: unmount (the servers see it and exit), then wait for them.
  if (conn_ != nullptr && !unmounted) conn_->Unmount();
  conn_.reset();
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!children_.empty() && Clock::now() < deadline) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      children_.erase(pid);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  for (pid_t pid : children_) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  for (auto& [fd, peer] : peers_) ::close(fd);
  CloseFd(&journal_fd_);
  ::close(sig_fd);
  ::close(listen_fd_);
  ::unlink(options_.socket_path.c_str());
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  return *end_;
}

}  // namespace

std::string HolderMessage::Get(const std::string& key) const {
  auto it = fields.find(key);
  return it == fields.end() ? "" : it->second;
}

std::string EncodeHolderMessage(const HolderMessage& message) {
  std::string out = message.type + "\n";
  for (const auto& [key, value] : message.fields) out += key + "=" + Escape(value) + "\n";
  return out;
}

Result<HolderMessage> DecodeHolderMessage(std::string_view bytes) {
  HolderMessage m;
  size_t end = bytes.find('\n');
  if (end == std::string_view::npos || end == 0) {
    return Status::InvalidArgument("not a holder message");
  }
  m.type = bytes.substr(0, end);
  bytes.remove_prefix(end + 1);
  while (!bytes.empty()) {
    end = bytes.find('\n');
    std::string_view line = bytes.substr(0, end);
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) return Status::InvalidArgument("a holder field without =");
    m.fields[std::string(line.substr(0, eq))] = Unescape(line.substr(eq + 1));
    bytes.remove_prefix(end == std::string_view::npos ? bytes.size() : end + 1);
  }
  return m;
}

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

// --- the server's side ---

struct HolderLink::Watcher {
  std::thread thread;
  int wake[2] = {-1, -1};
};

Result<std::unique_ptr<HolderLink>> HolderLink::Connect(const std::string& socket_path,
                                                        const std::string& mountpoint,
                                                        const std::string& options, int descriptors,
                                                        std::chrono::milliseconds wait) {
  std::unique_ptr<HolderLink> link(new HolderLink());
  LC_ASSIGN_OR_RETURN(link->fd_, ConnectTo(socket_path));
  LC_RETURN_IF_ERROR(Send(link->fd_, {"hello",
                                      {{"version", std::to_string(kHolderProtocol)},
                                       {"mountpoint", mountpoint},
                                       {"options", options},
                                       {"descriptors", std::to_string(descriptors)},
                                       {"pid", std::to_string(::getpid())}}}));
  std::vector<int> fds;
  Result<HolderMessage> answer = Receive(link->fd_, &fds, wait);
  if (!answer.ok()) {
    if (answer.status().code() == StatusCode::kDeadlineExceeded) {
      return Status::DeadlineExceeded("the holder at " + socket_path +
                                      " did not hand the mount over in " +
                                      std::to_string(wait.count()) + " ms");
    }
    return answer.status().WithContext("the holder at " + socket_path);
  }
  if (answer->type == "refused") return Status::PreconditionFailed(answer->Get("error"));
  if (answer->type != "welcome" || fds.size() < 2) {
    for (int f : fds) ::close(f);
    return Status::Internal("the holder's answer was '" + answer->type + "' with " +
                            std::to_string(fds.size()) + " descriptors");
  }
  link->journal_fd_ = fds[0];
  link->fuse_fds_.assign(fds.begin() + 1, fds.end());
  link->init_ = Unhex(answer->Get("init"));
  return link;
}

HolderLink::~HolderLink() {
  Unwatch();
  CloseFd(&fd_);
  for (int f : fuse_fds_) ::close(f);
  CloseFd(&journal_fd_);
}

std::vector<int> HolderLink::TakeFuseFds() { return std::exchange(fuse_fds_, {}); }
int HolderLink::TakeJournalFd() { return std::exchange(journal_fd_, -1); }

void HolderLink::SendInit(const std::string& init) {
  init_ = init;
  if (Status s = Send(fd_, {"init", {{"init", Hex(init)}}}); !s.ok()) {
    spdlog::warn("could not give the holder the FUSE INIT: {}", s.message());
  }
}

void HolderLink::SendServing() { (void)Send(fd_, {"serving", {}}); }

Status HolderLink::SendJournal(int fd) {
  int fds[] = {fd};
  Status s = Send(fd_, {"journal", {}}, std::span<const int>(fds));
  ::close(fd);
  return s;
}

void HolderLink::Unwatch() {
  if (watcher_ == nullptr) return;
  (void)!::write(watcher_->wake[1], "x", 1);
  if (watcher_->thread.joinable()) watcher_->thread.join();
  ::close(watcher_->wake[0]);
  ::close(watcher_->wake[1]);
  watcher_.reset();
}

void HolderLink::Watch(std::function<void()> on_stop, std::function<void()> on_gone) {
  watcher_ = std::make_unique<Watcher>();
  if (::pipe2(watcher_->wake, O_CLOEXEC) != 0) return;
  int fd = fd_;
  int wake = watcher_->wake[0];
  watcher_->thread =
      std::thread([fd, wake, on_stop = std::move(on_stop), on_gone = std::move(on_gone)] {
        while (true) {
          pollfd polls[] = {{fd, POLLIN, 0}, {wake, POLLIN, 0}};
          if (::poll(polls, 2, -1) < 0 && errno != EINTR) return;
          if (polls[1].revents != 0) return;
          if (polls[0].revents == 0) continue;
          Result<HolderMessage> m = Receive(fd, nullptr, std::chrono::milliseconds(0));
          if (!m.ok()) {
            if (m.status().code() == StatusCode::kDeadlineExceeded) continue;
            on_gone();
            return;
          }
          if (m->type == "stop") {
            spdlog::info("holder: pid {} takes the mount over: stopping", m->Get("successor"));
            on_stop();
          }
        }
      });
}

Result<TakeoverResult> RequestTakeover(const std::string& socket_path, const std::string& exe,
                                       std::chrono::milliseconds timeout) {
  LC_ASSIGN_OR_RETURN(int fd, ConnectTo(socket_path));
  Status sent = Send(fd, {"takeover", {{"exe", exe}}});
  Result<HolderMessage> answer =
      sent.ok() ? Receive(fd, nullptr, timeout) : Result<HolderMessage>(sent);
  ::close(fd);
  if (!answer.ok()) return answer.status().WithContext("the holder at " + socket_path);
  if (answer->type == "refused") return Status::PreconditionFailed(answer->Get("error"));
  if (answer->type != "taken")
    return Status::Internal("the holder answered '" + answer->type + "'");
  TakeoverResult result;
  result.pid = std::stoi(answer->Get("pid"));
  result.pause_s = std::stoi(answer->Get("pause_ms")) / 1000.0;
  return result;
}

}  // namespace lakecache
