#include "cli/command_line.h"

#include "cli/commands.h"

namespace lakecache::cli {

Status RejectSecretOverrides(const std::vector<std::string>& overrides) {
  for (const std::string& o : overrides) {
    std::string key = o.substr(0, o.find('='));
    if (key.ends_with("secret_key") || key.ends_with("session_token")) {
      return Status::InvalidArgument("-o " + key +
                                     ": secrets on the command line are visible in `ps`; use "
                                     "secret_key_file, the environment or the config file");
    }
  }
  return Status::Ok();
}

void AddGlobalFlags(CLI::App& app, GlobalFlags& f, std::string& timeout) {
  app.add_option("--config", f.config_file, "Configuration file (YAML or JindoFS .properties)");
  app.add_option("-o", f.overrides, "Override a config key: -o namespaces.NS.metadata_ttl=5m")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  app.add_option("--endpoint", f.endpoint, "Object store endpoint URL, e.g. http://127.0.0.1:9000");
  app.add_option("--region", f.region, "Object store region (default us-east-1)");
  app.add_flag("--path-style", f.path_style,
               "Address buckets path-style (endpoint/bucket/key); the default for an --endpoint "
               "that is an IP address or localhost");
  app.add_option("--ca-bundle", f.ca_bundle,
                 "PEM file of CAs to trust for HTTPS (or AWS_CA_BUNDLE)");
  app.add_option("--log-level", f.log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str();
  app.add_option("--log-file", f.log_file, "Write logs to this file instead of stderr");
  app.add_option("--timeout", timeout,
                 "How long to wait for an answer from an object store or a cluster, e.g. 10s, "
                 "2m: each request of ls, stat, cat and the admin commands, and a mount's "
                 "start-up; a long listing, cat or load goes on while answers keep coming. On a "
                 "terminal a line on stderr says what is still awaited")
      ->type_name("DURATION")
      ->capture_default_str();
}

Status ParseTimeout(const std::string& text, Duration* out) {
  Result<Duration> parsed = ParseDuration(text);
  if (!parsed.ok() || parsed->count() <= 0) {
    return Status::InvalidArgument("--timeout '" + text +
                                   "': expected a duration above zero, e.g. 30s, 2m or 500ms");
  }
  *out = *parsed;
  return Status::Ok();
}

void AddCredentialsFlag(CLI::App* cmd, std::string& dir, const std::string& what) {
  cmd->add_option("--credentials", dir,
                  "Folder with " + what + " (or " + std::string(kCredentialsEnv) +
                      "; `lakecache cert` or `cluster up --dir` makes one)")
      ->envname(kCredentialsEnv);
}

void AddAdminFlags(CLI::App* cmd, AdminCommand& c) {
  cmd->add_option(
         "--master", c.master,
         "HOST:PORT of the master, for /NAMESPACE/PATH (or " + std::string(kMasterEnv) + ")")
      ->envname(kMasterEnv);
  cmd->add_flag("--json", c.json, "Print one JSON object (schema: docs/admin.md)");
  AddCredentialsFlag(cmd, c.credentials, "the cluster's credentials; calls as the admin role");
}

void AddHealthSocketFlag(CLI::App* cmd, std::string& path) {
  cmd->add_option("--health-socket", path,
                  "Unix socket for the local health check (`lakecache health --socket PATH`, "
                  "the Kubernetes exec probe); default: none");
}

void AddMetricsFlag(CLI::App* cmd, std::string& listen, const std::string& extra) {
  cmd->add_option("--metrics-listen", listen,
                  "HOST:PORT serving Prometheus /metrics" + extra +
                      " (default: none; beyond loopback: needs metrics.token in --credentials, "
                      "or --insecure)");
}

void AddExposureFlags(CLI::App* cmd, bool& insecure, std::string& advertise,
                      const std::string& who) {
  cmd->add_flag("--insecure", insecure,
                "Serve in plain text beyond loopback without --credentials (warns; `cluster "
                "status` shows it): anyone who reaches the " +
                    who + " can use it");
  cmd->add_option("--advertise", advertise,
                  "HOST:PORT the " + who +
                      " announces to clients (IPv6 in brackets; default: $POD_IP with the "
                      "bound port, else the bound address)");
}

}  // namespace lakecache::cli
