#include "cluster_client/bulk_client.h"

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
  rpc::BlockReadRequest request;
  request.block = block;
  request.offset = offset;
  request.length = dst.size();
  LC_ASSIGN_OR_RETURN(rpc::BlockReplyHeader reply, Read(request, dst, deadline));
  if (!reply.status.ok()) return reply.status;
  return reply.data_length;
}

Result<rpc::BlockReplyHeader> BulkClient::Read(const rpc::BlockReadRequest& request,
                                               std::span<char> dst,
                                               std::chrono::steady_clock::time_point deadline,
                                               rpc::ReadProgress* progress) {
  uint64_t number = 0;
  uint64_t aborts = 0;
  {
    MutexLock lock(&mu_);
    number = requests_++;
    aborts = aborts_;
    in_flight_[number] = {std::chrono::steady_clock::now(), nullptr};
  }
  auto done = [&] {
    MutexLock lock(&mu_);
    in_flight_.erase(number);
  };
  Result<Connection> connection = Take(deadline, aborts);
  if (!connection.ok()) {
    done();
    return connection.status();
  }
  {
    MutexLock lock(&mu_);
    if (aborts_ != aborts) (*connection)->Abort();  // aborted while it connected
    in_flight_[number].connection = connection->get();
  }
  Result<rpc::BlockReplyHeader> reply =
      rpc::CallRead(**connection, request, dst, deadline, progress);
  done();  // before the connection goes: AbortRequests reaches it only while listed
  if (!reply.ok()) {
    GiveBack(nullptr);  // its state is unknown: never reused
    return reply.status();
  }
  GiveBack(std::move(*connection));
  if (!reply->status.ok()) reply->status = reply->status.WithContext("worker " + address_);
  return reply;
}

Status BulkClient::Probe(std::chrono::steady_clock::time_point deadline) {
  LC_ASSIGN_OR_RETURN(Connection connection, Open(deadline));
  return rpc::CallPing(*connection, deadline);
}

std::chrono::steady_clock::time_point BulkClient::OldestRequest() const {
  MutexLock lock(&mu_);
  auto oldest = std::chrono::steady_clock::time_point::max();
  for (const auto& [number, request] : in_flight_) oldest = std::min(oldest, request.start);
  return oldest;
}

size_t BulkClient::AbortRequests() {
  MutexLock lock(&mu_);
  ++aborts_;
  for (auto& [number, request] : in_flight_) {
    if (request.connection != nullptr) request.connection->Abort();
  }
  returned_cv_.SignalAll();  // those waiting for a connection
  return in_flight_.size();
}

Result<BulkClient::Connection> BulkClient::Take(std::chrono::steady_clock::time_point deadline,
                                                uint64_t aborts) {
  {
    MutexLock lock(&mu_);
    for (;;) {
      if (aborts_ != aborts) {
        return Status::Unavailable("worker " + address_ + " does not answer (a probe failed)");
      }
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
  Result<Connection> made = Open(deadline);
  if (!made.ok()) GiveBack(nullptr);
  return made;
}

Result<BulkClient::Connection> BulkClient::Open(
    std::chrono::steady_clock::time_point deadline) const {
  deadline = std::min(deadline, std::chrono::steady_clock::now() + options_.connect_timeout);
  LC_ASSIGN_OR_RETURN(
      Connection made,
      rpc::BulkConnection::Connect(address_, options_.tls.get(), options_.server_name, deadline));
  if (options_.credentials != nullptr) {
    LC_ASSIGN_OR_RETURN(std::string token, options_.credentials->Token());
    LC_RETURN_IF_ERROR(rpc::CallHello(*made, token, deadline));
  }
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
