#include "cli/unmount.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/mount_table.h"
#include "mount/mount_admin.h"
#include "mount/mount_holder.h"
#include "rpc/unix_socket.h"

extern char** environ;

namespace lakecache::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr size_t kUsersNamed = 3;  // processes a busy mount's message names; the rest are counted

// The pid of the process listening on the Unix socket at `path` (SO_PEERCRED on the connecting
// side: the listener's, from when it called listen); 0 when nothing listens or its pid is not
// visible from this pid namespace. Sends nothing: the listener sees a peer come and go.
pid_t ListenerPid(const std::string& path, int type) {
  Result<sockaddr_un> addr = rpc::UnixSocketAddress("socket", path);
  if (!addr.ok()) return 0;
  ScopedFd fd(::socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return 0;
  pid_t pid = 0;
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) == 0) {
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) pid = cred.pid;
  }
  return pid;
}

int Milliseconds(Clock::duration d) {
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(d).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 1 << 30));
}

std::string Trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

std::string ReadToEnd(int fd) {
  std::string out;
  char buf[512];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      return out;
    }
  }
}

// Runs `fusermount3 -u [-z] MOUNTPOINT` and waits for it; its stderr becomes the error.
Status RunFusermount(const std::string& mountpoint, bool lazy, bool* busy) {
  std::vector<std::string> args = {"fusermount3", "-u"};
  if (lazy) args.push_back("-z");
  args.push_back(mountpoint);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int err[2];
  if (::pipe2(err, O_CLOEXEC) != 0) {
    return Status::IoError(std::string("pipe: ") + std::strerror(errno));
  }
  ScopedFd err_read(err[0]), err_write(err[1]);
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  ::posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  err_write.reset();  // so that the read ends with fusermount3
  std::string said = rc == 0 ? ReadToEnd(err_read.get()) : "";
  err_read.reset();
  if (rc != 0) return Status::IoError(std::string("cannot run fusermount3: ") + std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  said = Trimmed(said);
  if (said.starts_with("fusermount3: ")) said.erase(0, std::strlen("fusermount3: "));
  *busy = said.find(std::strerror(EBUSY)) != std::string::npos;
  return Status::IoError("fusermount3 -u " + mountpoint + ": " + (said.empty() ? "failed" : said));
}

// One attempt at unmounting; `busy` says whether the kernel found the mount in use.
Status TryUnmount(const std::string& mountpoint, bool lazy, bool* busy) {
  *busy = false;
  if (::geteuid() != 0) return RunFusermount(mountpoint, lazy, busy);
  if (::umount2(mountpoint.c_str(), lazy ? MNT_DETACH : 0) == 0) return Status::Ok();
  int err = errno;
  *busy = err == EBUSY;
  std::string what = "unmounting " + mountpoint + ": " + std::strerror(err);
  if (err == EINVAL || err == ENOENT) return Status::InvalidArgument(what);
  if (err == EPERM) return Status::AccessDenied(what);
  return Status::IoError(what);
}

std::string Link(const std::string& path) {
  std::error_code ec;
  return fs::read_symlink(path, ec).string();
}

// "python3": the command name of `pid`.
std::string CommandName(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/comm");
  std::string name;
  std::getline(in, name);
  return name.empty() ? "?" : name;
}

}  // namespace

MountProcesses MountProcesses::Find(const std::string& mountpoint) {
  struct Socket {
    const char* role;
    std::string path;
    int type;
  };
  MountProcesses found;
  for (const Socket& s : {Socket{"holder", HolderSocketPath(mountpoint), SOCK_SEQPACKET},
                          Socket{"server", ControlSocketPath(mountpoint), SOCK_STREAM}}) {
    pid_t pid = ListenerPid(s.path, s.type);
    bool known = std::any_of(found.processes_.begin(), found.processes_.end(),
                             [pid](const Process& p) { return p.pid == pid; });
    if (pid <= 0 || pid == ::getpid() || known) continue;
    // Fails when it is gone already, or on a kernel before 5.3: nothing to wait for then.
    ScopedFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (pidfd.valid()) found.processes_.push_back({pid, std::move(pidfd), s.role});
  }
  return found;
}

Status MountProcesses::WaitForExit(std::chrono::milliseconds patience,
                                   std::chrono::milliseconds limit) {
  auto start = Clock::now();
  bool told = false;
  while (!processes_.empty()) {
    auto elapsed = Clock::now() - start;
    if (elapsed >= limit) break;
    if (!told && elapsed >= patience) {
      for (const Process& p : processes_) {
        std::fprintf(stderr,
                     "lakecache: still waiting for the mount's process %d (its %s) to exit\n",
                     static_cast<int>(p.pid), p.role);
      }
      told = true;
    }
    std::vector<pollfd> polls;
    for (const Process& p : processes_) polls.push_back({p.pidfd.get(), POLLIN, 0});
    // A pidfd is readable once its process has exited.
    Clock::duration until = told ? limit : std::min(patience, limit);
    int rc = ::poll(polls.data(), polls.size(), Milliseconds(until - elapsed));
    if (rc < 0 && errno != EINTR)
      return Status::IoError(std::string("poll: ") + std::strerror(errno));
    for (size_t i = polls.size(); i-- > 0;) {
      if (polls[i].revents == 0) continue;
      processes_.erase(processes_.begin() + static_cast<ptrdiff_t>(i));
    }
  }
  if (processes_.empty()) return Status::Ok();
  std::string still;
  for (const Process& p : processes_) {
    still += (still.empty() ? "" : ", ") + std::to_string(p.pid) + " (its " + p.role + ")";
  }
  return Status::DeadlineExceeded(
      "the mount's process " + still + " still runs " +
      std::to_string(std::chrono::duration_cast<std::chrono::seconds>(limit).count()) +
      " s after the unmount");
}

Result<Unmounted> UnmountFuse(const std::string& mountpoint, Detach detach) {
  Unmounted done;
  bool busy = false;
  if (detach != Detach::kAlways) {
    Status s = TryUnmount(mountpoint, /*lazy=*/false, &busy);
    if (s.ok()) return done;
    if (!busy) return s;
    done.busy = MountUsers(NormalizedPath(mountpoint));
    if (done.busy.empty())
      done.busy = "something uses it (" + std::string(std::strerror(EBUSY)) + ")";
    if (detach == Detach::kNever) {
      return Status::Unavailable(mountpoint + " is busy: " + done.busy +
                                 "; unmount it once they let go (`fusermount3 -u -z " + mountpoint +
                                 "` detaches it now, and it ends when they do)");
    }
  }
  LC_RETURN_IF_ERROR(TryUnmount(mountpoint, /*lazy=*/true, &busy));
  done.lazily = true;
  return done;
}

std::string MountUsers(const std::string& mountpoint) {
  auto inside = [&mountpoint](const std::string& path) {
    return path == mountpoint || (path.starts_with(mountpoint) && path.size() > mountpoint.size() &&
                                  path[mountpoint.size()] == '/');
  };
  std::string self = std::to_string(::getpid());
  std::vector<std::string> named;
  size_t more = 0;
  std::error_code ec;
  for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    std::string pid = it->path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos || pid == self) continue;
    std::string proc = "/proc/" + pid;
    std::string why;
    if (inside(Link(proc + "/cwd"))) {
      why = "has its working folder there";
    } else if (inside(Link(proc + "/root"))) {
      why = "has its root there";
    } else {
      std::error_code fd_ec;
      for (fs::directory_iterator fd(proc + "/fd", fd_ec), fd_end; !fd_ec && fd != fd_end;
           fd.increment(fd_ec)) {
        if (inside(Link(fd->path().string()))) {
          why = "has a file open there";
          break;
        }
      }
    }
    if (why.empty()) continue;
    if (named.size() == kUsersNamed) {
      ++more;
      continue;
    }
    named.push_back("pid " + pid + " (" + CommandName(pid) + ") " + why);
  }
  std::string out;
  for (const std::string& n : named) out += (out.empty() ? "" : "; ") + n;
  if (more > 0) out += "; and " + std::to_string(more) + " more";
  return out;
}

}  // namespace lakecache::cli
