// BulkClient: a client's bulk data path to one worker (the data address it advertises): block
// ranges over framed TCP (rpc/bulk_protocol.h), TLS with a client context, received straight into
// the caller's buffer. It keeps a small pool of connections (at most max_connections; a request
// takes one for itself, and gives it back only when its exchange ended cleanly). Any transport or
// framing error drops the connection and is kUnavailable (kDeadlineExceeded once the deadline has
// passed): the caller reads the block from another worker and discards what it partly got. An
// answer of the worker (not found, the object changed, ...) keeps its code. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/result.h"
#include "rpc/auth.h"
#include "rpc/bulk_connection.h"
#include "rpc/tls.h"

namespace lakecache {

namespace rpc {
class BlockId;
}  // namespace rpc

struct BulkClientOptions {
  size_t max_connections = 4;                  // per worker; > 0
  std::shared_ptr<const rpc::TlsContext> tls;  // a client context; null: plain text
  std::string server_name;                     // the name its certificate must show; "": HOST
  // Whose token every new connection presents in its hello (the client role's); null: none.
  std::shared_ptr<const rpc::ClusterCredentials> credentials;
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

  const std::string& address() const { return address_; }
  size_t open_connections() const EXCLUDES(mu_);  // for tests

 private:
  using Connection = std::unique_ptr<rpc::BulkConnection>;
  // An idle connection still open, or a new one while fewer than max_connections are open, else
  // waits for one to come back until `deadline`.
  Result<Connection> Take(std::chrono::steady_clock::time_point deadline) EXCLUDES(mu_);
  // `connection` null: it was dropped.
  void GiveBack(Connection connection) EXCLUDES(mu_);

  const std::string address_;
  const BulkClientOptions options_;
  mutable Mutex mu_;
  CondVar returned_cv_;
  std::vector<Connection> idle_ GUARDED_BY(mu_);
  size_t open_ GUARDED_BY(mu_) = 0;  // idle ones and those taken
};

}  // namespace lakecache
