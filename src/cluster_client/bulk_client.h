// BulkClient: a client's bulk data path to one worker (the data address it advertises): block
// ranges over framed TCP (rpc/bulk_protocol.h), TLS with a client context, received straight into
// the caller's buffer. It keeps a small pool of connections (at most max_connections; a request
// takes one for itself, and gives it back only when its exchange ended cleanly). Any transport or
// framing error drops the connection and is kUnavailable (kDeadlineExceeded once the deadline has
// passed): the caller reads the block from another worker and discards what it partly got. An
// answer of the worker (not found, the object changed, ...) keeps its code.
//
// A worker that stops answering (stopped, hung, cut off by the network) holds a request until its
// deadline: TCP gives no sign. So the client can ask whether the worker answers at all (Probe, a
// ping on a connection of its own) once a request has waited long, and fail every request in
// flight at once (AbortRequests) when it does not: they then go to another worker. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/result.h"
#include "rpc/bulk_connection.h"
#include "rpc/tls.h"
#include "security/auth.h"

namespace lakecache {

namespace rpc {
class BlockId;
struct BlockReadRequest;
struct BlockReplyHeader;
}  // namespace rpc

struct BulkClientOptions {
  size_t max_connections = 4;                  // per worker; > 0
  std::shared_ptr<const rpc::TlsContext> tls;  // a client context; null: plain text
  std::string server_name;                     // the name its certificate must show; "": HOST
  // Whose token every new connection presents in its hello (the client role's); null: none.
  std::shared_ptr<const security::ClusterCredentials> credentials;
  // A new connection's connect, TLS handshake and hello: a worker that answers at all does it at
  // once, so a longer wait means it does not (it is stopped or cut off).
  std::chrono::milliseconds connect_timeout{3000};
};

class BulkClient {
 public:
  BulkClient(std::string address, BulkClientOptions options);
  ~BulkClient();
  BulkClient(const BulkClient&) = delete;
  BulkClient& operator=(const BulkClient&) = delete;

  // Reads [offset, offset + dst.size()) of the block (clamped to its end) into dst by `deadline`.
  // Returns the bytes read.
  Result<size_t> ReadBlock(const rpc::BlockId& block, uint64_t offset, std::span<char> dst,
                           std::chrono::steady_clock::time_point deadline) EXCLUDES(mu_);

  // The whole exchange: `request` (with its flags), the bytes into dst, and the worker's reply
  // header (its answer, a digest or a redirect). Fails only on a transport or framing error.
  // `progress`: as rpc::CallRead's.
  Result<rpc::BlockReplyHeader> Read(const rpc::BlockReadRequest& request, std::span<char> dst,
                                     std::chrono::steady_clock::time_point deadline,
                                     rpc::ReadProgress* progress = nullptr) EXCLUDES(mu_);

  // Whether the worker answers: a new connection (with its hello) and a ping, by `deadline`.
  Status Probe(std::chrono::steady_clock::time_point deadline) EXCLUDES(mu_);
  // When the oldest request in flight started (waiting for a connection included); max() when
  // none is.
  std::chrono::steady_clock::time_point OldestRequest() const EXCLUDES(mu_);
  // Fails every request in flight now, those waiting for a connection included: each returns
  // kUnavailable at once. Returns how many there were.
  size_t AbortRequests() EXCLUDES(mu_);

  const std::string& address() const { return address_; }
  size_t open_connections() const EXCLUDES(mu_);  // for tests

 private:
  using Connection = std::unique_ptr<rpc::BulkConnection>;
  struct InFlight {
    std::chrono::steady_clock::time_point start;
    rpc::BulkConnection* connection = nullptr;  // while a request is on it
  };
  // An idle connection still open, or a new one while fewer than max_connections are open, else
  // waits for one to come back until `deadline`. Fails once AbortRequests ran after `aborts`.
  Result<Connection> Take(std::chrono::steady_clock::time_point deadline, uint64_t aborts)
      EXCLUDES(mu_);
  // A new connection, with the hello when there are credentials.
  Result<Connection> Open(std::chrono::steady_clock::time_point deadline) const;
  // `connection` null: it was dropped.
  void GiveBack(Connection connection) EXCLUDES(mu_);

  const std::string address_;
  const BulkClientOptions options_;
  mutable Mutex mu_;
  CondVar returned_cv_;
  std::vector<Connection> idle_ GUARDED_BY(mu_);
  size_t open_ GUARDED_BY(mu_) = 0;                         // idle ones and those taken
  std::map<uint64_t, InFlight> in_flight_ GUARDED_BY(mu_);  // by request number
  uint64_t requests_ GUARDED_BY(mu_) = 0;
  uint64_t aborts_ GUARDED_BY(mu_) = 0;  // AbortRequests calls
};

}  // namespace lakecache
