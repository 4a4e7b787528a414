// `lakecache master`: serves the control plane until SIGINT/SIGTERM.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <string>

#include "cli/commands.h"
#include "cli/metrics_listen.h"
#include "cli/server_main.h"
#include "common/units.h"
#include "master/master_server.h"
#include "rpc/grpc_util.h"

namespace lakecache::cli {
namespace {

// Shutdown waits for calls still inside the object store, which have their own (longer) timeouts;
// past this the process exits without them.
constexpr auto kShutdownLimit = std::chrono::seconds(5);

void StopWithin(MasterServer& server, std::chrono::seconds limit) {
  auto stopped = std::async(std::launch::async, [&server] { server.Shutdown(); });
  if (stopped.wait_for(limit) == std::future_status::ready) return;
  spdlog::warn("master: calls still running {}s after shutdown began; exiting without them",
               limit.count());
  spdlog::default_logger()->flush();
  std::_Exit(kExitOk);
}

// The TLS files and the user of --etcd-*; the password is read from its file or the environment,
// never taken from a flag (it would show in `ps`).
// `env_password`: LAKECACHE_ETCD_PASSWORD as RunMaster found it (and took out of the environment).
Status EtcdTlsAndAuth(const MasterRequest& req, const std::string& env_password,
                      EtcdOptions* etcd) {
  if (req.etcd_cert.empty() != req.etcd_key.empty()) {
    return Status::InvalidArgument("--etcd-cert and --etcd-key go together");
  }
  etcd->ca_file = req.etcd_ca;
  etcd->cert_file = req.etcd_cert;
  etcd->key_file = req.etcd_key;
  std::string password;
  if (!req.etcd_password_file.empty()) {
    std::ifstream in(req.etcd_password_file);
    if (!in) {
      return Status::InvalidArgument("--etcd-password-file " + req.etcd_password_file +
                                     ": cannot read it (" + std::strerror(errno) + ")");
    }
    std::getline(in, password);
    while (!password.empty() && (password.back() == '\r' || password.back() == ' ')) {
      password.pop_back();
    }
    if (password.empty()) {
      return Status::InvalidArgument("--etcd-password-file " + req.etcd_password_file +
                                     ": the file is empty");
    }
  } else {
    password = env_password;
  }
  if (req.etcd_user.empty() && !password.empty() && !req.etcd_password_file.empty()) {
    return Status::InvalidArgument("--etcd-password-file needs --etcd-user");
  }
  if (!req.etcd_user.empty() && password.empty()) {
    return Status::InvalidArgument("--etcd-user " + req.etcd_user +
                                   ": no password (give --etcd-password-file FILE or set " +
                                   kEtcdPasswordEnv + ")");
  }
  if (!req.etcd_user.empty() && !etcd->endpoints.empty() &&
      !etcd->endpoints.front().starts_with("https://")) {
    spdlog::warn(
        "--etcd-user {}: the endpoints are plain http, so the password crosses the "
        "network unencrypted; use https:// endpoints (--etcd-ca)",
        req.etcd_user);
  }
  etcd->user = req.etcd_user;
  if (!req.etcd_user.empty()) etcd->password = Secret(std::move(password));
  return Status::Ok();
}

// --etcd and its settings (membership and election in etcd), and --status-interval.
Status ApplyMembershipFlags(const MasterRequest& req, const std::string& env_password,
                            MasterOptions* options) {
  if (!req.etcd.empty()) {
    Result<std::vector<std::string>> endpoints = ParseEtcdEndpoints("--etcd", req.etcd);
    if (!endpoints.ok()) return endpoints.status();
    options->etcd.endpoints = std::move(*endpoints);
    if (req.etcd_prefix.empty() || req.etcd_prefix.front() != '/' ||
        req.etcd_prefix.back() != '/') {
      return Status::InvalidArgument("--etcd-prefix: '" + req.etcd_prefix +
                                     "' must start and end with '/'");
    }
    options->etcd_prefix = req.etcd_prefix;
    options->election_ttl = std::chrono::seconds(req.election_ttl);
    options->etcd_wait = std::chrono::seconds(req.etcd_wait);
    LC_RETURN_IF_ERROR(EtcdTlsAndAuth(req, env_password, &options->etcd));
  } else if (!req.etcd_ca.empty() || !req.etcd_cert.empty() || !req.etcd_key.empty() ||
             !req.etcd_user.empty() || !req.etcd_password_file.empty()) {
    return Status::InvalidArgument(
        "--etcd-ca, --etcd-cert, --etcd-key and --etcd-user need --etcd");
  }
  Result<Duration> interval = ParseDuration(req.status_interval);
  if (!interval.ok()) return interval.status().WithContext("--status-interval");
  options->status_interval =
      std::max(std::chrono::duration_cast<std::chrono::milliseconds>(*interval),
               std::chrono::milliseconds(100));
  return Status::Ok();
}

// --metadata-dir and --metadata-memory.
Status ApplyMetadataFlags(const MasterRequest& req, MasterOptions* options) {
  Result<uint64_t> memory = ParseByteSize(req.metadata_memory);
  if (!memory.ok()) return memory.status().WithContext("--metadata-memory");
  if (*memory == 0) return Status::InvalidArgument("--metadata-memory: must be more than 0");
  options->metadata_dir = req.metadata_dir;
  options->metadata_memory = *memory;
  return Status::Ok();
}

}  // namespace

int RunMaster(const GlobalFlags& flags, const MasterRequest& req) {
  // Why it did not start reaches the log too (an operator reads the log, not always stderr).
  auto fail = [log_file = !flags.log_file.empty()](const Status& s) {
    return ReportStartError(s, log_file);
  };
  // The etcd password, out of the environment before any thread starts: /proc/PID/environ and
  // child processes would see it there.
  std::string env_password;
  if (const char* env = std::getenv(kEtcdPasswordEnv); env != nullptr) env_password = env;
  ::unsetenv(kEtcdPasswordEnv);
  if (flags.config_file.empty()) {
    return fail(Status::InvalidArgument(
        "lakecache master needs --config FILE: the namespaces and their credentials"));
  }
  if (Status s = rpc::CheckListenAddress("--listen", req.listen); !s.ok()) return fail(s);
  Result<bool> exposed = CheckPlainTextExposure(
      "lakecache master", {{"--listen", req.listen}}, !req.credentials.empty(), req.insecure,
      "list every namespace and its metadata and join workers to the cluster",
      !flags.log_file.empty());
  if (!exposed.ok()) return fail(exposed.status());
  Result<HttpEndpointOptions> metrics_options =
      MetricsEndpointOptions("lakecache master", req.metrics_listen, req.credentials, req.insecure,
                             !flags.log_file.empty());
  if (!metrics_options.ok()) return fail(metrics_options.status());
  Result<std::string> advertise = ResolveAdvertise(req.advertise);
  if (!advertise.ok()) return fail(advertise.status());
  std::unique_ptr<metrics::Registry> registry = MakeMetricsRegistry(req.metrics_listen);
  BlockTerminationSignals();  // before gRPC and the object stores start threads
  CliContext ctx(flags);
  Result<Config> config = ctx.LoadConfig();
  if (!config.ok()) return fail(config.status());
  if (config->namespaces.empty()) {
    return fail(Status::InvalidArgument(flags.config_file + ": no namespaces to serve"));
  }

  MasterOptions options;
  options.listen = req.listen;
  options.store = ctx.MakeStoreOptions();
  options.advertise = *advertise;
  options.insecure = *exposed;
  options.credentials = req.credentials;
  options.health_socket = req.health_socket;
  options.metrics = registry.get();
  options.store.metrics = registry.get();
  options.version = kVersionNumber;
  if (Status s = ApplyMembershipFlags(req, env_password, &options); !s.ok()) return fail(s);
  if (Status s = ApplyMetadataFlags(req, &options); !s.ok()) return fail(s);
  Result<std::unique_ptr<MasterServer>> server = MasterServer::Start(*config, options);
  if (!server.ok()) return fail(server.status().WithContext("cannot start the master"));
  MasterServer& master = **server;
  std::unique_ptr<HttpEndpoint> metrics_endpoint;
  if (registry != nullptr) {
    auto endpoint = ServeMetrics(*metrics_options, registry.get(), master.StatusPages());
    if (!endpoint.ok()) {
      master.Shutdown();
      return fail(endpoint.status());
    }
    metrics_endpoint = std::move(*endpoint);
  }
  if (!req.address_file.empty()) {
    if (Status s = WriteAddressFile(req.address_file, master.address()); !s.ok()) {
      master.Shutdown();
      return fail(s);
    }
  }
  Announce(spdlog::level::info,
           "master serving " + Counted(config->namespaces.size(), "namespace") + " on " +
               master.address(),
           !flags.log_file.empty());

  int signal = WaitForTerminationSignal();
  spdlog::info("master: {} received, shutting down", ::strsignal(signal));
  metrics_endpoint.reset();
  StopWithin(master, kShutdownLimit);
  spdlog::info("master stopped");
  return kExitOk;
}

}  // namespace lakecache::cli
