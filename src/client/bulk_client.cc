#include "client/bulk_client.h"

#include "rpc/bulk_protocol.h"
#include "rpc/lakecache.pb.h"

namespace lakecache {

BulkClient::BulkClient(std::string address, BulkClientOptions options)
    : address_(std::move(address)), options_(std::move(options)) {}

BulkClient::~BulkClient() = default;

size_t BulkClient::open_connections() const {
  MutexLock lock(&mu_);
  return open_;
}

Result<size_t> BulkClient::ReadBlock(const rpc::BlockId& block, uint64_t offset,
                                     std::span<char> dst,
                                     std::chrono::steady_clock::time_point deadline) {
  LC_ASSIGN_OR_RETURN(Connection connection, Take(deadline));
  rpc::BlockReadRequest request{block, offset, dst.size()};
  Result<rpc::BlockReplyHeader> reply = rpc::CallRead(*connection, request, dst, deadline);
  if (!reply.ok()) {
    GiveBack(nullptr);  // its state is unknown: never reused
    return reply.status();
  }
  GiveBack(std::move(connection));
  if (!reply->status.ok()) return reply->status.WithContext("worker " + address_);
  return reply->data_length;
}

Result<BulkClient::Connection> BulkClient::Take(std::chrono::steady_clock::time_point deadline) {
  {
    MutexLock lock(&mu_);
    for (;;) {
      while (!idle_.empty()) {
        Connection c = std::move(idle_.back());
        idle_.pop_back();
        // An idle connection has nothing to read: if it has, the worker closed it (it restarted).
        if (!c->WaitReadable(std::chrono::steady_clock::now())) return c;
        --open_;
      }
      if (open_ < options_.max_connections) break;
      if (!returned_cv_.WaitUntil(&mu_, deadline)) {
        return Status::DeadlineExceeded("worker " + address_ + ": no connection free in time");
      }
    }
    ++open_;
  }
  Result<Connection> made =
      rpc::BulkConnection::Connect(address_, options_.tls.get(), options_.server_name, deadline);
  if (made.ok() && options_.credentials != nullptr) {
    Result<std::string> token = options_.credentials->Token();
    Status hello = token.ok() ? rpc::CallHello(**made, *token, deadline) : token.status();
    if (!hello.ok()) made = hello;
  }
  if (!made.ok()) GiveBack(nullptr);
  return made;
}

void BulkClient::GiveBack(Connection connection) {
  MutexLock lock(&mu_);
  if (connection != nullptr) {
    idle_.push_back(std::move(connection));
  } else {
    --open_;
  }
  returned_cv_.Signal();
}

}  // namespace lakecache
