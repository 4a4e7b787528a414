#include "admin/admin_service.h"

#include "admin/convert.h"
#include "rpc/grpc_util.h"

namespace lakecache {

using rpc::ToGrpcStatus;

Result<AdminServiceImpl::Job> AdminServiceImpl::StartJob(const std::string& ns,
                                                         const std::string& path,
                                                         uint32_t replicas) const {
  Job job;
  LC_ASSIGN_OR_RETURN(job.ns, backend_->namespaces().Get(ns));
  LC_RETURN_IF_ERROR(CheckRelativePath("path", path));
  LC_ASSIGN_OR_RETURN(job.sink, backend_->MakeSink(replicas, &job.replicas));
  return job;
}

grpc::Status AdminServiceImpl::Hello(grpc::ServerContext* context, const rpc::HelloRequest*,
                                     rpc::HelloResponse* response) {
  if (grpc::Status denied = Allow(context, "AdminService/Hello"); !denied.ok()) return denied;
  *response = backend_->Hello();
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::Load(grpc::ServerContext* context, const rpc::LoadRequest* request,
                                    grpc::ServerWriter<rpc::LoadProgress>* writer) {
  if (grpc::Status denied = Allow(context, "AdminService/Load"); !denied.ok()) return denied;
  if (grpc::Status elsewhere = backend_->LeaderOnly(context); !elsewhere.ok()) return elsewhere;
  Result<Job> job = StartJob(request->ns(), request->path(), request->replicas());
  if (!job.ok()) return ToGrpcStatus(job.status());
  // The caller learns that the load started (its first report may be a long listing away).
  writer->SendInitialMetadata();
  LoadOptions options;
  options.recursive = request->recursive();
  options.metadata_only = request->metadata_only();
  LoadJobTable::Running running = load_jobs_.Begin(request->ns(), request->path());
  auto result =
      RunLoad(*job->ns, request->path(), *job->sink, options, [&](const LoadProgress& progress) {
        running.Update(progress);
        rpc::LoadProgress message;
        rpc::ToProto(progress, job->replicas, &message);
        if (!writer->Write(message)) return false;  // the client went away
        return !context->IsCancelled();
      });
  if (!result.ok()) return ToGrpcStatus(result.status());
  // Leadership may have moved during the load: the pin is the leader's to keep.
  if (grpc::Status lost = backend_->LeaderOnly(context); !lost.ok()) {
    return grpc::Status(grpc::StatusCode::ABORTED,
                        "this master stopped leading the cluster during the load (" +
                            lost.error_message() +
                            "): run `lakecache load` again (blocks already cached are skipped)");
  }
  backend_->Pinned(request->ns(), request->path(), request->recursive());
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::GetReport(grpc::ServerContext* context, const rpc::ReportRequest*,
                                         rpc::Report* response) {
  if (grpc::Status denied = Allow(context, "AdminService/GetReport"); !denied.ok()) return denied;
  auto report = backend_->GetReport();
  if (!report.ok()) return ToGrpcStatus(report.status());
  *response = std::move(*report);
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::FreePath(grpc::ServerContext* context,
                                        const rpc::FreePathRequest* request,
                                        rpc::FreePathResponse* response) {
  if (grpc::Status denied = Allow(context, "AdminService/FreePath"); !denied.ok()) return denied;
  if (grpc::Status elsewhere = backend_->LeaderOnly(context); !elsewhere.ok()) return elsewhere;
  Result<Job> job = StartJob(request->ns(), request->path(), 1);
  if (!job.ok()) return ToGrpcStatus(job.status());
  auto freed = lakecache::FreePath(*job->ns, request->path(), request->recursive(), *job->sink);
  if (!freed.ok()) return ToGrpcStatus(freed.status());
  backend_->Unpinned(request->ns(), request->path());
  // Leadership moved during the free: the new leader still holds the listings pinned. A free
  // may be done again, so the answer is the redirect, and the command asks the new leader.
  if (grpc::Status lost = backend_->LeaderOnly(context); !lost.ok()) return lost;
  response->set_files(freed->files);
  response->set_blocks_freed(freed->blocks_freed);
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::StatPath(grpc::ServerContext* context,
                                        const rpc::StatPathRequest* request,
                                        rpc::StatPathResponse* response) {
  if (grpc::Status denied = Allow(context, "AdminService/StatPath"); !denied.ok()) return denied;
  Result<Job> job = StartJob(request->ns(), request->path(), 1);
  if (!job.ok()) return ToGrpcStatus(job.status());
  auto status = lakecache::StatPath(*job->ns, request->path(), *job->sink);
  if (!status.ok()) return ToGrpcStatus(status.status());
  rpc::ToProto(*status, response);
  return grpc::Status::OK;
}

}  // namespace lakecache
