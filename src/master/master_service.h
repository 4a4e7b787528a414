// MasterServiceImpl: the master's calls (rpc::MasterService): workers register and heartbeat,
// mounts fetch the cluster view, the namespaces, listings and stats (the latter from the leader's
// metadata cache), and note their writes. Every call checks the caller's role when the master has
// credentials. What it serves comes in MasterServiceDeps, complete at construction; the objects
// it names must outlive it. Calls are served on gRPC's threads; thread-safe.
#pragma once

#include <grpcpp/support/status.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/config.h"
#include "common/mutex.h"
#include "common/result.h"
#include "meta/namespace_table.h"
#include "rpc/lakecache.grpc.pb.h"
#include "security/auth.h"

namespace lakecache {

class ClientTable;
class EtcdMembership;
class WorkerRegistry;

struct MasterServiceDeps {
  const NamespaceTable* namespaces = nullptr;
  WorkerRegistry* registry = nullptr;
  ClientTable* clients = nullptr;  // the cluster mounts' reports
  const ClusterConfig* cluster = nullptr;
  // Null / empty for a master without credentials: no checks, no certificates issued.
  const security::Authorizer* authorizer = nullptr;
  std::string credentials_dir;
  bool insecure = false;  // serves plain text beyond loopback: the view says so
  // With etcd: registrations and heartbeats go to `membership` (the registry follows it); the
  // views name the leader; `leader_only` checks the calls only the leader serves (listings, stats
  // and write notes: one metadata cache for every mount). Without: null and empty.
  EtcdMembership* membership = nullptr;
  std::function<std::string()> leader;
  uint32_t election_ttl_ms = 0;
  std::function<grpc::Status(grpc::ServerContext*)> leader_only;
};

class MasterServiceImpl final : public rpc::MasterService::Service {
 public:
  explicit MasterServiceImpl(MasterServiceDeps deps) : deps_(std::move(deps)) {}

  // The address the master announces, known once its server listens (calls may come before).
  void Serving(const std::string& address) EXCLUDES(address_mu_);

  grpc::Status Register(grpc::ServerContext* ctx, const rpc::RegisterRequest* req,
                        rpc::RegisterResponse* resp) override;

  grpc::Status Heartbeat(grpc::ServerContext* ctx, const rpc::HeartbeatRequest* req,
                         rpc::HeartbeatResponse* resp) override;

  // A worker's own certificate, for the key whose request it sends: named after that key, so a
  // worker can be given no id but its own.
  grpc::Status IssueCertificate(grpc::ServerContext* ctx, const rpc::CertificateRequest* req,
                                rpc::CertificateResponse* resp) override;

  grpc::Status GetClusterView(grpc::ServerContext* ctx, const rpc::ClusterViewRequest* req,
                              rpc::ClusterView* resp) override EXCLUDES(address_mu_);

  grpc::Status GetNamespaces(grpc::ServerContext* ctx, const rpc::NamespacesRequest*,
                             rpc::NamespacesResponse* resp) override;

  // A mount's write through a worker: the folder's cached listing shows it now, so every mount
  // that lists the folder next sees it (theirs revalidate with their TTL).
  grpc::Status NoteWrite(grpc::ServerContext* ctx, const rpc::NoteWriteRequest* req,
                         rpc::NoteWriteResponse*) override;

  grpc::Status ListDir(grpc::ServerContext* ctx, const rpc::ListDirRequest* req,
                       rpc::ListDirResponse* resp) override;

  grpc::Status Stat(grpc::ServerContext* ctx, const rpc::StatRequest* req,
                    rpc::StatResponse* resp) override;

 private:
  // The namespace a request names, its path (`what`) checked.
  Result<Namespace*> Find(const std::string& name, std::string_view what,
                          const std::string& path) const;

  grpc::Status LeaderOnly(grpc::ServerContext* ctx) const;

  // Listings and the view: mounts, admin commands, and the workers' own tools.
  static constexpr security::RoleSet kReaders =
      security::Roles(security::Role::kClient, security::Role::kAdmin);

  grpc::Status Allow(const grpc::ServerContext* ctx, security::RoleSet roles,
                     std::string_view method) const;

  // A worker's Register or Heartbeat: the worker role's token, over a connection whose client
  // certificate is the one the master issued for this id; a claimed capacity above the bound is
  // cut to it.
  grpc::Status CheckWorker(const grpc::ServerContext* ctx, std::string_view method,
                           rpc::WorkerInfo* worker) const;

  const MasterServiceDeps deps_;
  // Known once the server listens, when calls may already come.
  Mutex address_mu_;
  std::string address_ GUARDED_BY(address_mu_);
};

}  // namespace lakecache
