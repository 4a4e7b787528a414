#include "rpc/grpc_log.h"

#include <grpc/support/log.h>
#include <spdlog/spdlog.h>

#include <string>

namespace lakecache::rpc {
namespace {

std::string_view BaseName(std::string_view file) {
  size_t slash = file.rfind('/');
  return slash == std::string_view::npos ? file : file.substr(slash + 1);
}

spdlog::level::level_enum LevelOf(gpr_log_severity severity) {
  switch (severity) {
    case GPR_LOG_SEVERITY_DEBUG:
      return spdlog::level::debug;
    case GPR_LOG_SEVERITY_INFO:
      return spdlog::level::info;
    default:
      return spdlog::level::err;
  }
}

void Log(gpr_log_func_args* args) {
  std::string_view file = args->file != nullptr ? args->file : "";
  std::string_view message = args->message != nullptr ? args->message : "";
  spdlog::level::level_enum level =
      ExplainedElsewhere(file, message) ? spdlog::level::debug : LevelOf(args->severity);
  spdlog::log(level, "grpc: {} ({}:{})", message, BaseName(file), args->line);
}

}  // namespace

bool ExplainedElsewhere(std::string_view file, std::string_view message) {
  std::string_view base = BaseName(file);
  // A handshake with a peer of the other transport (TLS meeting plain text).
  if (base == "ssl_transport_security.cc" && message.find("wrong version number") != message.npos) {
    return true;
  }
  // A port that could not be bound: StartServer says which, and why.
  return (base == "chttp2_server.cc" || base == "server_builder.cc" ||
          base == "tcp_server_posix.cc" || base == "tcp_server_utils_posix_common.cc") &&
         (message.find("bind") != message.npos || message.find("Failed to add") != message.npos ||
          message.find("No address added") != message.npos);
}

void RouteGrpcLogs() { gpr_set_log_function(Log); }

}  // namespace lakecache::rpc
