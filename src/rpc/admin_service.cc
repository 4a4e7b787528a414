#include "rpc/admin_service.h"

#include "rpc/convert.h"
#include "rpc/grpc_util.h"

namespace lakecache::rpc {

bool IsRelativePath(std::string_view path) {
  if (path.empty()) return true;  // the root
  if (path.find('\0') != std::string_view::npos) return false;
  for (size_t start = 0;;) {
    size_t slash = path.find('/', start);
    std::string_view part =
        path.substr(start, slash == std::string_view::npos ? slash : slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

std::string RelativePathError(const std::string& what, const std::string& path) {
  return what + " '" + path +
         "': expected a path relative to the namespace root (no leading or trailing '/', no "
         "empty, '.' or '..' parts)";
}

grpc::Status UnknownNamespace(const NamespaceTable& namespaces, const std::string& name) {
  std::string known;
  for (const std::string& n : namespaces.names()) known += (known.empty() ? "" : ", ") + n;
  return grpc::Status(grpc::StatusCode::NOT_FOUND,
                      "unknown namespace '" + name + "' (there are: " + known + ")");
}

grpc::Status AdminServiceImpl::Find(const std::string& ns, const std::string& path,
                                    Namespace** out) const {
  *out = backend_->namespaces().Find(ns);
  if (*out == nullptr) return UnknownNamespace(backend_->namespaces(), ns);
  if (!IsRelativePath(path)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, RelativePathError("path", path));
  }
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::Hello(grpc::ServerContext*, const HelloRequest*,
                                     HelloResponse* response) {
  *response = backend_->Hello();
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::Load(grpc::ServerContext* context, const LoadRequest* request,
                                    grpc::ServerWriter<LoadProgress>* writer) {
  Namespace* ns = nullptr;
  if (grpc::Status s = Find(request->ns(), request->path(), &ns); !s.ok()) return s;
  uint32_t replicas = 1;
  auto made = backend_->MakeSink(request->replicas(), &replicas);
  if (!made.ok()) return ToGrpcStatus(made.status());
  std::unique_ptr<BlockSink> sink = std::move(*made);
  LoadOptions options;
  options.recursive = request->recursive();
  options.metadata_only = request->metadata_only();
  auto result =
      RunLoad(*ns, request->path(), *sink, options, [&](const lakecache::LoadProgress& progress) {
        LoadProgress message;
        ToProto(progress, replicas, &message);
        if (!writer->Write(message)) return false;  // the client went away
        return !context->IsCancelled();
      });
  if (!result.ok()) return ToGrpcStatus(result.status());
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::GetReport(grpc::ServerContext*, const ReportRequest*,
                                         Report* response) {
  auto report = backend_->GetReport();
  if (!report.ok()) return ToGrpcStatus(report.status());
  *response = std::move(*report);
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::FreePath(grpc::ServerContext*, const FreePathRequest* request,
                                        FreePathResponse* response) {
  Namespace* ns = nullptr;
  if (grpc::Status s = Find(request->ns(), request->path(), &ns); !s.ok()) return s;
  uint32_t replicas = 1;
  auto sink = backend_->MakeSink(1, &replicas);
  if (!sink.ok()) return ToGrpcStatus(sink.status());
  auto freed = lakecache::FreePath(*ns, request->path(), request->recursive(), **sink);
  if (!freed.ok()) return ToGrpcStatus(freed.status());
  response->set_files(freed->files);
  response->set_blocks_freed(freed->blocks_freed);
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::StatPath(grpc::ServerContext*, const StatPathRequest* request,
                                        StatPathResponse* response) {
  Namespace* ns = nullptr;
  if (grpc::Status s = Find(request->ns(), request->path(), &ns); !s.ok()) return s;
  uint32_t replicas = 1;
  auto sink = backend_->MakeSink(1, &replicas);
  if (!sink.ok()) return ToGrpcStatus(sink.status());
  auto status = lakecache::StatPath(*ns, request->path(), **sink);
  if (!status.ok()) return ToGrpcStatus(status.status());
  ToProto(*status, response);
  return grpc::Status::OK;
}

}  // namespace lakecache::rpc
