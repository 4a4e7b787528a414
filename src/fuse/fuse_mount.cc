#include "fuse/fuse_mount.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "common/mount_table.h"
#include "common/text_codec.h"
#include "fuse/fuse_ops.h"
#include "fuse/inode_trimmer.h"
#include "fuse/session_pool.h"

namespace lakecache {
namespace {

// How often Stop sends its signal again while Run has not returned.
constexpr auto kStopResend = std::chrono::milliseconds(50);

// The sysfs read-ahead file of the FUSE mount at `mountpoint` (the newest FUSE mount there, found
// in /proc/self/mountinfo); empty when there is none. The mountpoint's folder is resolved, not the
// mountpoint: a stat of the mount would wait for this server, which is not serving yet.
std::string ReadAheadFileOf(const std::string& mountpoint) {
  if (mountpoint.empty()) return "";
  const std::string target = NormalizedPath(mountpoint);
  std::string found;
  for (const MountEntry& m : ReadMountTable()) {
    if (m.type.starts_with("fuse") && m.mountpoint == target) found = m.device;  // the last: newest
  }
  return found.empty() ? "" : "/sys/class/bdi/" + found + "/read_ahead_kb";
}

}  // namespace

FuseMount::FuseMount(std::shared_ptr<FileSystem> fs, FuseMountOptions options)
    : fs_(std::move(fs)),
      options_(std::move(options)),
      context_(NewFuseContext(fs_.get(), options_)),
      wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

FuseMount::~FuseMount() {
  for (fuse_session* se : clones_) fuse_session_destroy(se);
  if (session_ != nullptr) {
    if (mounted_) fuse_session_unmount(session_);
    fuse_remove_signal_handlers(session_);
    fuse_session_destroy(session_);
  }
}

void FuseMount::SetReadAhead(const std::string& mountpoint) {
  if (options_.kernel_read_ahead == 0) return;
  context_->read_ahead_file = ReadAheadFileOf(mountpoint);
  context_->read_ahead_kib = std::max<uint64_t>(4, options_.kernel_read_ahead / 1024);
}

std::string FuseMountOptionString(const FuseMountOptions& options) {
  // libfuse splits -o at commas unless escaped with a backslash (a cluster's fsname names its
  // masters: "lakecache:cluster:a:7400,b:7400").
  std::string fs_name = TextCodec::Backslash(",").Escape(options.fs_name);
  std::string opts = std::string(options.read_only ? "ro" : "rw") + ",fsname=" + fs_name +
                     ",subtype=lakecache,max_read=" + std::to_string(kFuseMaxRead);
  if (options.allow_other) opts += ",allow_other";
  if (options.default_permissions) opts += ",default_permissions";
  return opts;
}

fuse_session* NewFuseSession(const std::string& opts, const fuse_lowlevel_ops& ops,
                             void* userdata) {
  const char* argv[] = {"lakecache", "-o", opts.c_str()};
  fuse_args args = FUSE_ARGS_INIT(3, const_cast<char**>(argv));
  fuse_session* session = fuse_session_new(&args, &ops, sizeof(ops), userdata);
  fuse_opt_free_args(&args);  // the session keeps copies of what it parsed
  return session;
}

Status FuseMount::NewSession() {
  std::string opts = FuseMountOptionString(options_);
  session_ = NewFuseSession(opts, MakeFuseOps(), context_.get());
  if (session_ == nullptr)
    return Status::Internal("could not create the FUSE session (" + opts + ")");
  if (fuse_set_signal_handlers(session_) != 0) {
    return Status::Internal("could not install signal handlers");
  }
  return Status::Ok();
}

Status FuseMount::Mount(const std::string& mountpoint) {
  LC_RETURN_IF_ERROR(NewSession());
  if (fuse_session_mount(session_, mountpoint.c_str()) != 0) {
    return Status::IoError("mounting at " + mountpoint +
                           " failed (is /dev/fuse available and fusermount3 installed?)");
  }
  mounted_ = true;
  SetReadAhead(mountpoint);
  return Status::Ok();
}

Status FuseMount::Adopt(int fuse_fd, const std::string& mountpoint, const FuseInit* init,
                        std::function<void(const FuseInit&)> on_init) {
  std::string opts = FuseMountOptionString(options_);
  if (init != nullptr && init->options != opts) {
    return Status::InvalidArgument("the mount was made with other FUSE options (" + init->options +
                                   ") than this server's (" + opts +
                                   "): it cannot take the mount over");
  }
  LC_RETURN_IF_ERROR(NewSession());
  // libfuse adopts an open descriptor given as /dev/fd/N: no mount, and no unmount later.
  std::string dev = "/dev/fd/" + std::to_string(fuse_fd);
  if (fuse_session_mount(session_, dev.c_str()) != 0) {
    return Status::IoError("cannot serve the FUSE connection " + dev);
  }
  adopted_ = true;
  adopted_mountpoint_ = mountpoint;
  SetReadAhead(mountpoint);
  if (init != nullptr) init_ = *init;
  init_.options = opts;
  on_init_ = std::move(on_init);
  return Status::Ok();
}

Status FuseMount::Adopt(std::vector<int> fuse_fds, const std::string& mountpoint,
                        const FuseInit* init, std::function<void(const FuseInit&)> on_init) {
  if (fuse_fds.empty()) return Status::InvalidArgument("no FUSE descriptor to serve");
  LC_RETURN_IF_ERROR(Adopt(fuse_fds[0], mountpoint, init, std::move(on_init)));
  std::string opts = FuseMountOptionString(options_);
  for (size_t i = 1; i < fuse_fds.size(); ++i) {
    fuse_session* se = NewFuseSession(opts, MakeFuseOps(), context_.get());
    if (se == nullptr) return Status::Internal("could not create a FUSE session");
    clones_.push_back(se);
    std::string dev = "/dev/fd/" + std::to_string(fuse_fds[i]);
    if (fuse_session_mount(se, dev.c_str()) != 0) {
      return Status::IoError("cannot serve the FUSE descriptor " + dev);
    }
  }
  return Status::Ok();
}

void FuseMount::Stop() {
  stop_ = true;
  uint64_t one = 1;
  (void)!::write(wake_fd_.get(), &one, sizeof(one));  // a session pool waits on it
  // libfuse's own loop waits on a semaphore a signal interrupts; libfuse's SIGTERM handler ends
  // the session, and each clone's thread waits in read(2), which the signal interrupts. A signal
  // that lands between Run's check of stop_ and its wait is lost, so it is sent again until Run
  // returns; each wait ends as soon as it does.
  MutexLock lock(&run_mu_);
  while (running_) {
    fuse_session_exit(session_);
    for (fuse_session* se : clones_) fuse_session_exit(se);
    pthread_kill(run_thread_, SIGTERM);
    run_done_.WaitUntil(&run_mu_, std::chrono::steady_clock::now() + kStopResend);
  }
}

// Every descriptor is read by one pool of threads. Ends when a session ends (unmounted) or Stop.
Status FuseMount::RunSessions() {
  // The clones need the connection's INIT too: libfuse answers EIO until it has seen one. Their
  // replies find no request in the kernel and are dropped.
  for (fuse_session* se : clones_) {
    fuse_buf buf;
    std::memset(&buf, 0, sizeof(buf));
    buf.size = init_.request.size();
    buf.mem = init_.request.data();
    fuse_session_process_buf(se, &buf);
  }
  std::vector<fuse_session*> all{session_};
  all.insert(all.end(), clones_.begin(), clones_.end());
  SessionPool(std::move(all), options_.max_threads).Run(stop_, wake_fd_.get());
  return Status::Ok();
}

Status FuseMount::Run() {
  {
    MutexLock lock(&run_mu_);
    run_thread_ = pthread_self();
    running_ = true;
  }
  struct NotRunning {
    FuseMount* mount;
    ~NotRunning() {
      MutexLock lock(&mount->run_mu_);
      mount->running_ = false;
      mount->run_done_.SignalAll();
    }
  } not_running{this};
  if (stop_) return Status::Ok();
  if (adopted_) LC_RETURN_IF_ERROR(StartAdopted());
  if (stop_) return Status::Ok();
  std::optional<InodeTrimmer> trimmer;  // stops before the connection is unmounted
  if (options_.kernel_inodes > 0) {
    trimmer.emplace(session_, fs_.get(), options_.kernel_inodes, options_.metrics);
  }
  if (!clones_.empty()) return RunSessions();
  fuse_loop_config* config = fuse_loop_cfg_create();
  // A cloned descriptor dies with this process, and the requests read on it fail: a connection
  // that outlives its server is read on the one descriptor the holder keeps.
  fuse_loop_cfg_set_clone_fd(config, adopted_ ? 0 : 1);
  fuse_loop_cfg_set_max_threads(config, options_.max_threads);
  int rc = fuse_session_loop_mt(session_, config);
  fuse_loop_cfg_destroy(config);
  trimmer.reset();
  if (mounted_) fuse_session_unmount(session_);
  mounted_ = false;
  if (rc != 0 && rc != SIGTERM && rc != SIGINT && rc != SIGHUP) {
    return Status::IoError("FUSE loop ended with error " + std::to_string(rc));
  }
  return Status::Ok();
}

}  // namespace lakecache
