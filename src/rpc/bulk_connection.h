// BulkConnection: one connected TCP socket of the bulk data path, plain or TLS (a TlsContext),
// whose reads and writes end by a deadline: the socket is non-blocking and every wait is a poll
// with the time left, so a stuck peer costs a caller its deadline and never more.
//
// Errors: a peer that closes, resets or sends garbage is kUnavailable, a deadline that passes is
// kDeadlineExceeded, both naming the peer; after any error the connection is unusable (drop it).
// Not thread-safe: one request owns it at a time; only Abort may be called from another thread.
#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "common/result.h"
#include "rpc/tls.h"

namespace lakecache::rpc {

// Told how many bytes of a read have arrived, as they do (a block passed on while it lands).
class ReadProgress {
 public:
  virtual void Landed(uint64_t bytes) = 0;

 protected:
  ~ReadProgress() = default;
};

class BulkConnection {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  // Connects to HOST:PORT and, with `tls` (a client context), does the handshake, checking the
  // server's certificate names `server_name` (empty: HOST).
  static Result<std::unique_ptr<BulkConnection>> Connect(const std::string& address,
                                                         const TlsContext* tls,
                                                         const std::string& server_name,
                                                         Deadline deadline);
  // Takes an accepted socket (owned from here on, also on failure); with `tls` (a server context)
  // does the handshake. `peer` names the client in messages.
  static Result<std::unique_ptr<BulkConnection>> Accept(int fd, std::string peer,
                                                        const TlsContext* tls, Deadline deadline);
  // The same in two steps, so that a server can Abort a connection during its handshake: Adopt
  // takes the socket, StartTls does the server's handshake.
  static std::unique_ptr<BulkConnection> Adopt(int fd, std::string peer);
  Status StartTls(const TlsContext& tls, Deadline deadline);
  // Waits (by `deadline`) for the first bytes and copies up to dst.size() of them without
  // consuming them; returns how many. REQUIRES: plain (before StartTls).
  size_t Peek(std::span<char> dst, Deadline deadline);
  ~BulkConnection();
  BulkConnection(const BulkConnection&) = delete;
  BulkConnection& operator=(const BulkConnection&) = delete;

  // Fills all of dst. kUnavailable when the peer closes first (`*eof_at_start` set, if given, when
  // it closed before the first byte: a clean end between requests). `progress`, if given, is told
  // how much of dst is filled as bytes arrive.
  Status ReadFull(std::span<char> dst, Deadline deadline, bool* eof_at_start = nullptr,
                  ReadProgress* progress = nullptr);
  // Sends every piece, in order (one writev for a plain socket).
  Status WriteAll(std::span<const std::span<const char>> pieces, Deadline deadline);
  // Sends `head`, then `length` bytes of file `fd` from `offset` with sendfile: the kernel sends
  // the file's pages without a copy in user space. REQUIRES: plain (no TLS). The pages are sent
  // after this returns: the caller must not change them until the peer has read them.
  Status WriteFile(std::span<const char> head, int fd, uint64_t offset, uint64_t length,
                   Deadline deadline);
  // Waits until bytes can be read (or the peer closed) by `deadline`: false when it passed.
  bool WaitReadable(Deadline deadline);
  // Wakes a thread blocked in this connection; its call and every later one fail. Thread-safe.
  void Abort();

  const std::string& peer() const { return peer_; }
  bool tls() const { return ssl_ != nullptr; }
  // An accepted connection from a peer on this host (a loopback address, or ours).
  bool same_host() const { return same_host_; }

 private:
  BulkConnection(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}
  // Waits for `events` on the socket; an error once the deadline passes or the socket fails.
  Status Wait(short events, Deadline deadline);
  // Runs an OpenSSL call until it succeeds, waiting as it asks; `what` names it in errors.
  template <typename Op>
  Result<int> DriveTls(Op op, const char* what, Deadline deadline);
  Status Handshake(bool server, Deadline deadline);
  // `flags`: more sendmsg flags (MSG_MORE: more bytes follow at once).
  Status WritePlain(std::span<const std::span<const char>> pieces, Deadline deadline,
                    int flags = 0);
  // After a call on the socket failed (errno): Ok to call it again (interrupted, or the socket is
  // ready for `events` now), else the failure, naming `what`.
  Status AfterError(short events, const char* what, Deadline deadline);
  Status Failed(const std::string& what) const;  // kUnavailable naming the peer

  int fd_;
  std::string peer_;
  SSL* ssl_ = nullptr;
  bool same_host_ = false;
  std::atomic<bool> aborted_{false};
};

struct TcpListener {
  int fd = -1;          // owned by the caller
  std::string address;  // HOST:PORT bound (the chosen port when 0 was asked)
};
// A listening TCP socket on HOST:PORT (blocking accept; close-on-exec).
Result<TcpListener> ListenTcp(const std::string& address);

}  // namespace lakecache::rpc
