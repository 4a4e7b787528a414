// BulkServer: a worker's bulk data path, beside its gRPC server: block ranges over framed TCP
// (rpc/bulk_protocol.h), read through the same BlockReader as gRPC's ReadBlock and sent from the
// pinned block itself (plain: one sendmsg of the header and the block, no copy in user space;
// TLS: encrypted straight from it). With a TLS context every connection must complete a mutual
// TLS 1.3 handshake; a plain-text client gets one plain error reply saying so, then is closed.
//
// One thread per connection (a client keeps a few, each carrying one request at a time), at most
// kMaxConnections; more are closed at once. Idle connections stay open until the client closes
// them or the server shuts down; a reply to a client that stops reading gives up after a minute.
// Thread-safe. Shutdown (or the destructor) stops accepting, closes every connection (a request
// in flight fails on the client, which reads the block elsewhere) and waits for their threads.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/metrics.h"
#include "common/mutex.h"
#include "common/result.h"
#include "common/scoped_fd.h"
#include "rpc/bulk_connection.h"
#include "rpc/tls.h"
#include "security/auth.h"
#include "worker/block_reader.h"

namespace lakecache {

struct BulkServerOptions {
  std::string listen = "127.0.0.1:0";          // HOST:PORT; port 0: any free port
  std::shared_ptr<const rpc::TlsContext> tls;  // a server context; null: plain text
  // With it, a connection starts with a hello carrying the client role's token; null: none.
  std::shared_ptr<const security::Authorizer> authorizer;
  // Each request timed, from its arrival to its reply written
  // (lakecache_worker_rpc_duration_seconds {method="BulkRead"}); default: not timed.
  metrics::Histogram request_duration;
};

class BulkServer {
 public:
  static constexpr size_t kMaxConnections = 1024;

  // REQUIRES: `reader` outlives the server.
  static Result<std::unique_ptr<BulkServer>> Start(const BulkServerOptions& options,
                                                   BlockReader* reader);
  ~BulkServer();
  BulkServer(const BulkServer&) = delete;
  BulkServer& operator=(const BulkServer&) = delete;

  const std::string& address() const { return address_; }  // bound HOST:PORT
  void Shutdown() EXCLUDES(mu_);                           // idempotent

 private:
  BulkServer(BulkServerOptions options, BlockReader* reader)
      : options_(std::move(options)), reader_(reader) {}
  void AcceptLoop() EXCLUDES(mu_);
  void Serve(int fd, std::string peer) EXCLUDES(mu_);
  // Whether to serve the connection: with TLS, after its handshake; a plain-text client (its
  // first bytes are a frame's magic) is told TLS is required and refused. *worker: whether it
  // presented the worker role's token (or role tokens are off), which reads between workers need.
  bool Admitted(rpc::BulkConnection& connection, bool* worker);
  void ServeRequests(rpc::BulkConnection& connection, bool worker);

  const BulkServerOptions options_;
  BlockReader* const reader_;
  std::string address_;
  ScopedFd listen_fd_;
  std::thread acceptor_;

  Mutex mu_;
  CondVar idle_cv_;  // signalled when a connection thread ends
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<rpc::BulkConnection*> open_ GUARDED_BY(mu_);  // connections being served
  size_t threads_ GUARDED_BY(mu_) = 0;                      // connection threads running
};

}  // namespace lakecache
