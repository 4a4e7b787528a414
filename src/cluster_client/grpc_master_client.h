// GrpcMasterClient: MasterClient over gRPC to the masters of a MasterSet. Calls that only the
// leader serves (listings, stats, write notes) follow its redirects and fail over until their
// deadline; the view and the namespaces, which any master answers from memory, get short attempts
// when there are several masters. Each view names the leader (with etcd), which calls go to next.
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "cluster_client/client_options.h"
#include "cluster_client/master_client.h"

namespace lakecache {

class MasterSet;

class GrpcMasterClient final : public MasterClient {
 public:
  // The masters of `masters` (HOST:PORT[,HOST:PORT...]), once one of them answers within
  // options.connect_timeout; a clear message says what to check when none does.
  static Result<std::unique_ptr<GrpcMasterClient>> Connect(const std::string& masters,
                                                           const ClusterClientOptions& options);
  ~GrpcMasterClient() override;

  Result<std::vector<ClusterNamespace>> Namespaces() override;
  Result<rpc::ClusterView> View(const rpc::ClusterViewRequest& request) override;
  Result<ClusterListing> ListDir(const std::string& ns, const std::string& dir,
                                 const ListDirPage& page, Clock::time_point deadline,
                                 bool revalidate) override;
  Result<ClusterStat> Stat(const std::string& ns, const std::string& path,
                           Clock::time_point deadline) override;
  Status NoteWrite(const rpc::NoteWriteRequest& request, Clock::time_point deadline) override;

 private:
  GrpcMasterClient(std::unique_ptr<MasterSet> masters, std::chrono::milliseconds rpc_timeout);
  // One attempt of a call the master answers from memory (the view, the namespaces, a write's
  // note): with several masters, short enough that a silent one leaves time to ask another within
  // the call's timeout.
  std::chrono::milliseconds QuickAttempt() const;
  // Runs `call` on the leading master, each try at most `attempt`, following redirects and
  // failing over until `deadline` (max: one attempt, plus two election leases with etcd).
  template <typename Call>
  Status OnLeader(const Call& call, std::chrono::milliseconds attempt, Clock::time_point deadline);

  const std::unique_ptr<MasterSet> masters_;
  const std::chrono::milliseconds rpc_timeout_;
  std::atomic<uint32_t> election_ttl_ms_{0};  // from the last view: 0 without etcd
};

}  // namespace lakecache
