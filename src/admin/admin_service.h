// AdminService: `lakecache load`, `report`, `free` and `stat` over gRPC (rpc::AdminService), the
// same for a cluster (the master serves it) and a standalone mount (its control socket). What
// differs, where blocks live and how the cache reports itself, is the AdminBackend; the request
// checks, the load's progress stream and the error mapping are here. Calls are served on gRPC's
// threads; the backend must be thread-safe and outlive the service.
#pragma once

#include <memory>
#include <string>

#include "admin/load_jobs.h"
#include "common/result.h"
#include "jobs/load_job.h"
#include "meta/namespace_table.h"
#include "rpc/lakecache.grpc.pb.h"
#include "security/auth.h"

namespace lakecache {

class AdminBackend {
 public:
  virtual ~AdminBackend() = default;
  virtual const NamespaceTable& namespaces() const = 0;
  // Where a job's blocks go. `replicas` as asked (0: one); *aimed is what the sink can do.
  virtual Result<std::unique_ptr<BlockSink>> MakeSink(uint32_t replicas, uint32_t* aimed) = 0;
  virtual Result<rpc::Report> GetReport() = 0;
  virtual rpc::HelloResponse Hello() = 0;
  // OK where loads and frees may run here; else the status that says where they run (a master
  // that follows the cluster's leader redirects to it: master_client/master_set.h).
  virtual grpc::Status LeaderOnly(grpc::ServerContext*) { return grpc::Status::OK; }
  // A load pinned the listings of `path` (and below, `recursive`) in namespace `ns`; a free
  // unpinned them. A cluster keeps the list, so another master that comes to lead pins them too.
  virtual void Pinned(const std::string& /*ns*/, const std::string& /*path*/, bool /*recursive*/) {}
  virtual void Unpinned(const std::string& /*ns*/, const std::string& /*path*/) {}
};

class AdminServiceImpl final : public rpc::AdminService::Service {
 public:
  // `authorizer`: every call needs the admin role's token; null (a mount's control socket, where
  // the peer's uid is the check, or a loopback master without credentials): none.
  explicit AdminServiceImpl(AdminBackend* backend,
                            std::shared_ptr<const security::Authorizer> authorizer = nullptr)
      : backend_(backend), authorizer_(std::move(authorizer)) {}

  grpc::Status Hello(grpc::ServerContext*, const rpc::HelloRequest*,
                     rpc::HelloResponse* response) override;
  grpc::Status Load(grpc::ServerContext* context, const rpc::LoadRequest* request,
                    grpc::ServerWriter<rpc::LoadProgress>* writer) override;
  grpc::Status GetReport(grpc::ServerContext*, const rpc::ReportRequest*,
                         rpc::Report* response) override;
  grpc::Status FreePath(grpc::ServerContext*, const rpc::FreePathRequest* request,
                        rpc::FreePathResponse* response) override;
  grpc::Status StatPath(grpc::ServerContext*, const rpc::StatPathRequest* request,
                        rpc::StatPathResponse* response) override;

  // The loads running through this service.
  const LoadJobTable& load_jobs() const { return load_jobs_; }

 private:
  struct Job {
    Namespace* ns = nullptr;
    std::unique_ptr<BlockSink> sink;
    uint32_t replicas = 1;  // what the sink can do
  };
  // The namespace a request names (its path checked) and a sink for `replicas` (0: one).
  Result<Job> StartJob(const std::string& ns, const std::string& path, uint32_t replicas) const;

  grpc::Status Allow(const grpc::ServerContext* context, std::string_view method) const {
    return security::Authorize(authorizer_.get(), context, security::Roles(security::Role::kAdmin),
                               method);
  }

  AdminBackend* backend_;
  std::shared_ptr<const security::Authorizer> authorizer_;
  LoadJobTable load_jobs_;
};

}  // namespace lakecache
