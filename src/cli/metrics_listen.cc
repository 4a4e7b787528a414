#include "cli/metrics_listen.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <thread>

#include "cli/commands.h"
#include "cli/server_main.h"
#include "rpc/grpc_util.h"

namespace lakecache::cli {

Result<HttpEndpointOptions> MetricsEndpointOptions(const std::string& command,
                                                   const std::string& listen,
                                                   const std::string& credentials, bool insecure,
                                                   bool log_file) {
  HttpEndpointOptions options;
  options.listen = listen;
  if (listen.empty()) return options;
  LC_RETURN_IF_ERROR(rpc::CheckListenAddress("--metrics-listen", listen));
  if (!credentials.empty()) {
    std::string token = credentials + "/" + kMetricsTokenFile;
    if (::access(token.c_str(), R_OK) == 0) {
      options.token_path = token;
      return options;
    }
    if (IsLoopbackListen(listen)) return options;
    return Status::InvalidArgument(
        command + ": --metrics-listen " + listen + " is not a loopback address and " + token +
        " is missing: every scrape beyond loopback must present that token (`lakecache cert "
        "--dir " +
        credentials + "` adds it)");
  }
  LC_RETURN_IF_ERROR(CheckPlainTextExposure(command, {{"--metrics-listen", listen}}, false,
                                            insecure, "read the cache's metrics", log_file)
                         .status());
  return options;
}

Status CheckMetricsListen(const HttpEndpointOptions& options) {
  if (options.listen.empty()) return Status::Ok();
  metrics::Registry registry;
  return HttpEndpoint::Start(options, &registry).status();  // and closed again at once
}

std::unique_ptr<metrics::Registry> MakeMetricsRegistry(const std::string& listen) {
  if (listen.empty()) return nullptr;
  auto registry = std::make_unique<metrics::Registry>();
  registry
      ->GetGauge("lakecache_build_info", "lakecache's version (the value is 1)",
                 {{"version", kVersionNumber}})
      .Set(1);
  return registry;
}

Result<std::unique_ptr<HttpEndpoint>> ServeMetrics(const HttpEndpointOptions& options,
                                                   const metrics::Registry* registry,
                                                   std::map<std::string, HttpPage> pages,
                                                   std::chrono::milliseconds bind_wait) {
  auto give_up = std::chrono::steady_clock::now() + bind_wait;
  while (true) {
    Result<std::unique_ptr<HttpEndpoint>> endpoint = HttpEndpoint::Start(options, registry, pages);
    if (endpoint.ok()) {
      spdlog::info("metrics on http://{}/metrics{}", (*endpoint)->address(),
                   options.token_path.empty() ? "" : " (the metrics token is required)");
      return endpoint;
    }
    if (endpoint.status().code() != StatusCode::kUnavailable ||
        std::chrono::steady_clock::now() >= give_up) {
      return endpoint.status();
    }
    // The port is another process's still (a restarted daemon's predecessor, exiting): its release
    // is no event this process can wait on, so binding is tried again shortly, until bind_wait.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace lakecache::cli
