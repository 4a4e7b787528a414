// `lakecache worker`: a cache node of a cluster.
#include <spdlog/spdlog.h>

#include <cstdio>

#include "cli/cache_flags.h"
#include "cli/commands.h"
#include "cli/metrics_listen.h"
#include "cli/server_main.h"
#include "rpc/grpc_util.h"
#include "worker/worker_server.h"

namespace lakecache::cli {

int RunWorker(const GlobalFlags& flags, const WorkerRequest& req) {
  // Why it did not start reaches the log too (an operator reads the log, not always stderr).
  auto fail = [log_file = !flags.log_file.empty()](const Status& s) {
    return ReportStartError(s, log_file);
  };
  if (flags.config_file.empty()) {
    return fail(Status::InvalidArgument(
        "lakecache worker needs --config FILE: the namespaces and their credentials (the same "
        "file as the master's)"));
  }
  CliContext ctx(flags);
  Result<Config> config = ctx.LoadConfig();
  if (!config.ok()) return fail(config.status());
  if (Status s = ApplyCacheFlags(req.cache_flags, &config->cache); !s.ok()) return fail(s);
  WarnCacheBeyondDisk(config->cache);
  if (Status s = rpc::CheckListenAddress("--listen", req.listen); !s.ok()) return fail(s);
  // The bulk data path listens on --listen's host unless --data-listen says otherwise.
  std::vector<ListenFlag> listens = {{"--listen", req.listen}};
  if (!req.data_listen.empty()) listens.push_back({"--data-listen", req.data_listen});
  Result<bool> exposed =
      CheckPlainTextExposure("lakecache worker", listens, !req.credentials.empty(), req.insecure,
                             "read every cached byte", !flags.log_file.empty());
  if (!exposed.ok()) return fail(exposed.status());
  Result<HttpEndpointOptions> metrics_options =
      MetricsEndpointOptions("lakecache worker", req.metrics_listen, req.credentials, req.insecure,
                             !flags.log_file.empty());
  if (!metrics_options.ok()) return fail(metrics_options.status());
  Result<std::string> advertise = ResolveAdvertise(req.advertise);
  if (!advertise.ok()) return fail(advertise.status());
  std::unique_ptr<metrics::Registry> registry = MakeMetricsRegistry(req.metrics_listen);
  WorkerOptions options;
  options.listen = req.listen;
  options.master = req.master;
  options.store = ctx.MakeStoreOptions();
  options.shared_memory = !req.no_shared_memory;
  options.node_socket = req.node_socket;
  options.shm_uids.assign(req.shm_uids.begin(), req.shm_uids.end());
  options.data_listen = req.data_listen;
  options.credentials = req.credentials;
  options.advertise = *advertise;
  options.insecure = *exposed;
  options.health_socket = req.health_socket;
  options.metrics = registry.get();
  options.store.metrics = registry.get();
  BlockTerminationSignals();  // before any thread starts
  Result<std::unique_ptr<WorkerServer>> worker = WorkerServer::Start(*config, options);
  if (!worker.ok()) return fail(worker.status());
  std::unique_ptr<HttpEndpoint> metrics_endpoint;
  if (registry != nullptr) {
    auto endpoint = ServeMetrics(*metrics_options, registry.get());
    if (!endpoint.ok()) return fail(endpoint.status());
    metrics_endpoint = std::move(*endpoint);
  }
  if (!req.address_file.empty()) {
    if (Status s = WriteAddressFile(req.address_file, (*worker)->address()); !s.ok()) {
      return fail(s);
    }
  }
  std::fprintf(stderr, "lakecache: worker %s serving on %s, master %s\n", (*worker)->id().c_str(),
               (*worker)->address().c_str(), req.master.c_str());
  int signal = WaitForTerminationSignal();
  spdlog::info("worker {}: signal {}, stopping", (*worker)->id(), signal);
  metrics_endpoint.reset();
  (*worker)->Shutdown();  // writes the disk tier's queued blocks before exiting
  spdlog::default_logger()->flush();
  return kExitOk;
}

}  // namespace lakecache::cli
