// One message with descriptors on the native data path's socket (SOCK_SEQPACKET), for the server
// and the client library alike: header-only, on libc alone (the client library links nothing of
// lakecache). Both return -1 with errno set on failure.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace lakecache::native {

inline constexpr size_t kMaxMessageFds = 4;

// Sends `count` bytes at `data` (one message) with `nfds` descriptors.
inline ssize_t SendMessage(int sock, const void* data, size_t count, const int* fds, size_t nfds) {
  iovec iov{const_cast<void*>(data), count};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxMessageFds)] = {};
  if (nfds > kMaxMessageFds) {
    errno = EINVAL;
    return -1;
  }
  if (nfds > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  ssize_t n;
  do {
    n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n;
}

// Receives one message of at most `capacity` bytes into `data`, and up to kMaxMessageFds
// descriptors (close-on-exec) into `fds` (*nfds: how many). A message or descriptors cut short
// fail with EMSGSIZE (the descriptors that came are closed). 0: the peer hung up.
inline ssize_t ReceiveMessage(int sock, void* data, size_t capacity, int* fds, size_t* nfds) {
  iovec iov{data, capacity};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxMessageFds)];
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  *nfds = 0;
  if (n < 0) return n;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (*nfds < kMaxMessageFds) {
        fds[(*nfds)++] = fd;
      } else {
        ::close(fd);
      }
    }
  }
  if ((msg.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) != 0) {
    for (size_t i = 0; i < *nfds; ++i) ::close(fds[i]);
    *nfds = 0;
    errno = EMSGSIZE;
    return -1;
  }
  return n;
}

}  // namespace lakecache::native
