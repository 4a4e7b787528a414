// Taking a FUSE connection over from a server that died or stopped: the INIT the kernel sent the
// first server only, saved and replayed, and the requests the previous server had read but not
// answered (resent by the kernel where it can, else answered EINTR).
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <spdlog/spdlog.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fuse/fuse_mount.h"

namespace lakecache {
namespace {

// Of the kernel's INIT request: where fuse_init_in's flags2 lies (after the 40-byte in-header and
// major, minor, max_readahead, flags), and FUSE_HAS_RESEND (flag bit 39, so bit 7 of flags2);
// FUSE_NOTIFY_RESEND, the notification that asks for the resend. Newer than Debian 12's headers.
constexpr size_t kInitFlags2Offset = sizeof(fuse_in_header) + 4 * sizeof(uint32_t);
constexpr uint32_t kHasResendFlags2Bit = 1u << 7;
constexpr int32_t kNotifyResend = 7;

constexpr std::string_view kInitMagic = "lakecache-fuse-init 1\n";

}  // namespace

std::string EncodeFuseInit(const FuseInit& init) {
  return std::string(kInitMagic) + init.options + "\n" + init.request;
}

Result<FuseInit> DecodeFuseInit(std::string_view blob) {
  if (!blob.starts_with(kInitMagic)) {
    return Status::InvalidArgument("not a saved FUSE INIT (no '" +
                                   std::string(kInitMagic.substr(0, kInitMagic.size() - 1)) +
                                   "' header)");
  }
  blob.remove_prefix(kInitMagic.size());
  size_t nl = blob.find('\n');
  if (nl == std::string_view::npos || blob.size() - nl - 1 < sizeof(fuse_in_header)) {
    return Status::InvalidArgument("a saved FUSE INIT that is cut short");
  }
  FuseInit init;
  init.options = std::string(blob.substr(0, nl));
  init.request = std::string(blob.substr(nl + 1));
  fuse_in_header header;
  std::memcpy(&header, init.request.data(), sizeof(header));
  if (header.opcode != FUSE_INIT || header.len != init.request.size()) {
    return Status::InvalidArgument("a saved FUSE INIT whose request is not an INIT");
  }
  return init;
}

bool KernelResends(const FuseInit& init) {
  if (init.request.size() < kInitFlags2Offset + sizeof(uint32_t)) return false;
  uint32_t flags2 = 0;
  std::memcpy(&flags2, init.request.data() + kInitFlags2Offset, sizeof(flags2));
  return (flags2 & kHasResendFlags2Bit) != 0;
}

// Without the resend, what the dead server had read but not answered waits in the kernel for a
// reply that would never come, its callers stuck for good. Those requests are the most recent
// before the first this server reads, on the same descriptor: each gets EINTR (a caller that
// retries on EINTR, as Python does, reads on). Request ids rise by 2; a reply to an id the kernel
// is not waiting for is refused and harms nothing. A statfs of the mountpoint makes sure a first
// request comes.
Status FuseMount::AnswerLostRequests() {
  constexpr uint64_t kSwept = 1 << 15;  // far more than can be in flight
  int fd = fuse_session_fd(session_);
  std::vector<int> fds = {fd};
  for (fuse_session* se : clones_) fds.push_back(fuse_session_fd(se));
  if (!adopted_mountpoint_.empty()) {
    std::string path = adopted_mountpoint_;
    std::thread([path] {
      struct statvfs st;
      ::statvfs(path.c_str(), &st);
    }).detach();
  }
  fuse_buf buf;
  std::memset(&buf, 0, sizeof(buf));
  int n = fuse_session_receive_buf(session_, &buf);
  if (n < static_cast<int>(sizeof(fuse_in_header))) {
    std::free(buf.mem);
    return Status::IoError("the FUSE connection ended while this server took it over");
  }
  fuse_in_header first;
  std::memcpy(&first, buf.mem, sizeof(first));
  uint64_t answered = 0;
  for (uint64_t id = first.unique, k = 0; id > 2 && k < kSwept; ++k) {
    id -= 2;
    fuse_out_header reply{sizeof(fuse_out_header), -EINTR, id};
    for (int f : fds) {  // a reply finds only the requests read on its own descriptor
      if (::write(f, &reply, sizeof(reply)) == static_cast<ssize_t>(sizeof(reply))) ++answered;
    }
  }
  if (answered > 0) {
    spdlog::warn(
        "FUSE: {} request(s) the previous server had not answered got EINTR (this kernel "
        "cannot resend them)",
        answered);
  }
  buf.size = static_cast<size_t>(n);
  fuse_session_process_buf(session_, &buf);
  std::free(buf.mem);
  return Status::Ok();
}

Status FuseMount::StartAdopted() {
  int fd = fuse_session_fd(session_);
  if (!init_.request.empty()) {
    // The kernel sent INIT to the first server only: replay it, so libfuse negotiates the same
    // settings and serves (before it, it answers every request with EIO). Its reply finds no
    // request in the kernel and is dropped.
    fuse_buf buf;
    std::memset(&buf, 0, sizeof(buf));
    buf.size = init_.request.size();
    buf.mem = init_.request.data();
    fuse_session_process_buf(session_, &buf);
    // options_.kernel_resend false behaves as a kernel without the resend (before 6.9) would.
    if (KernelResends(init_) && options_.kernel_resend) {
      // FUSE_NOTIFY_RESEND (libfuse 3.14 has no call for it): what the dead server had read but
      // not answered goes back to the queue this server reads.
      fuse_out_header notify{sizeof(fuse_out_header), kNotifyResend, 0};
      if (::write(fd, &notify, sizeof(notify)) == static_cast<ssize_t>(sizeof(notify))) {
        return Status::Ok();
      }
      spdlog::warn("FUSE: asking the kernel to resend the previous server's requests failed: {}",
                   std::strerror(errno));
    }
    return AnswerLostRequests();
  }
  fuse_buf buf;
  std::memset(&buf, 0, sizeof(buf));
  int n = fuse_session_receive_buf(session_, &buf);
  if (n <= 0) {
    std::free(buf.mem);
    return Status::IoError("the FUSE connection ended before its INIT");
  }
  init_.request.assign(static_cast<const char*>(buf.mem), static_cast<size_t>(n));
  if (on_init_) on_init_(init_);
  buf.size = static_cast<size_t>(n);
  fuse_session_process_buf(session_, &buf);
  std::free(buf.mem);
  return Status::Ok();
}

}  // namespace lakecache
