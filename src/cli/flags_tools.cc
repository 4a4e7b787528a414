#include "cli/command_line.h"
#include "cli/commands.h"

namespace lakecache::cli {

std::vector<Subcommand> AddToolCommands(CLI::App& app) {
  auto cert_request = std::make_shared<CertRequest>();
  auto health_request = std::make_shared<HealthRequest>();
  auto holder_request = std::make_shared<HolderRequest>();
  auto umount_point = std::make_shared<std::string>();
  CertRequest& cert_req = *cert_request;
  HealthRequest& health_req = *health_request;
  HolderRequest& holder_req = *holder_request;
  CLI::App* cert = app.add_subcommand(
      "cert",
      "Make a cluster's credentials folder (CA, the master's certificate, a token per role), or "
      "renew its certificate; prints the files it wrote, never their contents");
  cert->add_option("--dir", cert_req.dir, "The credentials folder (made with mode 0700)")
      ->required();
  cert->add_option("--name", cert_req.options.names,
                   "Another DNS name or IP address of the master, for tls.crt (repeatable; it "
                   "always has lakecache-master, localhost, 127.0.0.1)")
      ->allow_extra_args(false);
  cert->add_option("--days", cert_req.options.days, "Validity of tls.crt in days")
      ->check(CLI::Range(1, 36500))
      ->capture_default_str();
  CLI::Option* renew =
      cert->add_flag("--renew", cert_req.options.renew,
                     "Issue a new tls.crt and tls.key from the folder's CA (rotation)");
  cert->add_flag("--force", cert_req.options.force,
                 "Make everything new: CA, certificate and tokens (every node needs the new "
                 "files)")
      ->excludes(renew);

  CLI::App* health = app.add_subcommand(
      "health", "Exit 0 when the local master, worker or mount serves (a Kubernetes exec probe)");
  health->add_option("mountpoint", health_req.mountpoint, "A lakecache mount's folder");
  health->add_option("--socket", health_req.socket,
                     "The --health-socket of a master or worker on this host");
  health->add_flag("--live", health_req.live,
                   "Answering is enough (a liveness probe): a worker whose master is away passes");
  health->add_option("--timeout", health_req.timeout, "How long to wait for an answer (e.g. 500ms)")
      ->capture_default_str();

  CLI::App* holder = app.add_subcommand(
      "holder",
      "Hold a mount for its servers (`lakecache mount --holder SOCKET`), so it survives their "
      "restarts; mounts when the first asks, unmounts on SIGTERM");
  holder->add_option("--socket", holder_req.socket, "The Unix socket servers connect to")
      ->required();

  CLI::App* umount = app.add_subcommand("umount", "Unmount a lakecache mount");
  umount->add_option("mountpoint", *umount_point, "The folder it is mounted at")->required();
  CLI::App* config = app.add_subcommand("config", "Configuration tools");
  config->require_subcommand(1);
  CLI::App* show = config->add_subcommand("show", "Print the effective config, secrets redacted");
  show->fallthrough();
  return {
      {cert, [cert_request](const GlobalFlags&) { return RunCert(*cert_request); }},
      {health, [health_request](const GlobalFlags&) { return RunHealth(*health_request); }},
      {umount, [umount_point](const GlobalFlags&) { return RunUmount(*umount_point); }},
      {holder, [holder_request](const GlobalFlags&) { return RunHolder(*holder_request); }},
      {show, [](const GlobalFlags& flags) { return RunConfigShow(CliContext(flags)); }},
  };
}

}  // namespace lakecache::cli
