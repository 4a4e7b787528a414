// AdminService: `lakecache load`, `report`, `free` and `stat` over gRPC (rpc::AdminService), the
// same for a cluster (the master serves it) and a standalone mount (its control socket). What
// differs, where blocks live and how the cache reports itself, is the AdminBackend; the request
// checks, the load's progress stream and the error mapping are here.
#pragma once

#include <memory>
#include <string>

#include "common/result.h"
#include "jobs/load_job.h"
#include "meta/namespace_table.h"
#include "rpc/lakecache.grpc.pb.h"

namespace lakecache::rpc {

class AdminBackend {
 public:
  virtual ~AdminBackend() = default;
  virtual const NamespaceTable& namespaces() const = 0;
  // Where a job's blocks go. `replicas` as asked (0: one); *aimed is what the sink can do.
  virtual Result<std::unique_ptr<BlockSink>> MakeSink(uint32_t replicas, uint32_t* aimed) = 0;
  virtual Result<Report> GetReport() = 0;
  virtual HelloResponse Hello() = 0;
};

class AdminServiceImpl final : public AdminService::Service {
 public:
  explicit AdminServiceImpl(AdminBackend* backend) : backend_(backend) {}

  grpc::Status Hello(grpc::ServerContext*, const HelloRequest*, HelloResponse* response) override;
  grpc::Status Load(grpc::ServerContext* context, const LoadRequest* request,
                    grpc::ServerWriter<LoadProgress>* writer) override;
  grpc::Status GetReport(grpc::ServerContext*, const ReportRequest*, Report* response) override;
  grpc::Status FreePath(grpc::ServerContext*, const FreePathRequest* request,
                        FreePathResponse* response) override;
  grpc::Status StatPath(grpc::ServerContext*, const StatPathRequest* request,
                        StatPathResponse* response) override;

 private:
  // The namespace a request names, its path checked; an error status otherwise.
  grpc::Status Find(const std::string& ns, const std::string& path, Namespace** out) const;

  AdminBackend* backend_;
};

// A path as the protocol has it: relative to the namespace root, no leading or trailing '/', no
// empty, "." or ".." parts ("" is the root). Anything else could name keys outside the namespace.
bool IsRelativePath(std::string_view path);
std::string RelativePathError(const std::string& what, const std::string& path);

// NOT_FOUND naming the namespaces there are.
grpc::Status UnknownNamespace(const NamespaceTable& namespaces, const std::string& name);

}  // namespace lakecache::rpc
