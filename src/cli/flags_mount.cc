#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/mount_options.h"

namespace lakecache::cli {
namespace {

// `mount [URI] MOUNTPOINT`: one word alone is the mountpoint, unless it is a URI, whose mountpoint
// was forgotten.
Status SplitMountArgs(const std::string& first, const std::string& second, MountRequest* req) {
  if (!second.empty()) {
    req->uri = first;
    req->mountpoint = second;
    return Status::Ok();
  }
  if (first.empty() || first.find("://") != std::string::npos) {
    return Status::InvalidArgument("mount: the MOUNTPOINT is missing: `lakecache mount " +
                                   (first.empty() ? std::string("[URI]") : first) +
                                   " MOUNTPOINT` (an existing empty folder)");
  }
  req->mountpoint = first;
  return Status::Ok();
}

// How a mount caches: --cache-dir, --cache-size, --mem-cache, --read-ahead, --memory-budget.
void AddMountCacheFlags(CLI::App* mount, MountRequest& req) {
  mount->add_option("--cache-dir", req.cache_flags.cache_dir,
                    "Disk cache directory, e.g. /var/cache/lakecache (default: memory only)");
  mount->add_option("--cache-size", req.cache_flags.cache_size,
                    "Capacity of --cache-dir (default 10GiB)");
  mount->add_option("--mem-cache", req.cache_flags.mem_cache,
                    "Memory cache capacity (default 1GiB)");
  mount->add_option("--read-ahead", req.read_ahead,
                    "Largest read-ahead window of a sequential reader, e.g. 64MiB (0: none)");
  mount->add_option("--memory-budget", req.memory_budget,
                    "Memory for in-flight and prefetched blocks, all files together (default "
                    "512MiB)");
}

}  // namespace

std::vector<Subcommand> AddMountCommand(CLI::App& app, int argc, char** argv) {
  struct State {
    std::string mount_first, mount_second;
    std::vector<std::string> mount_o;
    MountRequest mount_req;
  };
  auto s = std::make_shared<State>();
  CLI::App* mount = app.add_subcommand(
      "mount",
      "Mount object storage as a folder (read-write where the namespaces allow writes): `mount "
      "s3://bucket[/prefix] MOUNTPOINT` "
      "or `mount --config FILE MOUNTPOINT` (each namespace a top-level folder), or `mount "
      "--master HOST:PORT MOUNTPOINT` (every namespace of a cluster)");
  mount->add_option("URI", s->mount_first,
                    "s3://bucket[/prefix], oss://bucket[/prefix] or file:///dir, shown at the "
                    "mountpoint's root (with --config, the settings of the file's namespace "
                    "over it, if any); not with --master");
  mount->add_option("MOUNTPOINT", s->mount_second, "An existing empty folder");
  mount
      ->add_option("-o", s->mount_o,
                   "Mount options (comma-separated) or a config override KEY=VALUE; listed below")
      ->type_name("OPTION")
      ->allow_extra_args(false);
  mount->footer("Mount options (-o):\n" + MountOptionsHelp() +
                "\nStart-up: each namespace's store (or, with --master, the master) must answer "
                "within --timeout (a global flag, default 30s), or the mount fails before anything "
                "is mounted; on a terminal a line says what it still waits for.\n");
  AddMountCacheFlags(mount, s->mount_req);
  mount->add_flag("--background", s->mount_req.background,
                  "Return once the mount is ready, saying where it logs: --log-file, by default "
                  "/tmp/lakecache-mount-UID-MOUNTPOINT-HASH.log");
  mount
      ->add_option("--master", s->mount_req.master,
                   "Cluster mode: read through the workers of the master at HOST:PORT (or " +
                       std::string(kMasterEnv) + "); `mount --master ADDR MOUNTPOINT`")
      ->envname(kMasterEnv);
  AddCredentialsFlag(mount, s->mount_req.credentials,
                     "the cluster's credentials (cluster mode); calls as the client role");

  mount
      ->add_option("--allow-uid", s->mount_req.allow_uids,
                   "A uid whose admin commands (load, free, report, stat) the mount's control "
                   "socket serves, besides the mount's own and root (repeatable; adds to "
                   "client.allow_uids)")
      ->check(CLI::Range(0u, 4294967294u));
  mount->add_option("--holder", s->mount_req.holder,
                    "Serve the mount the holder at this socket keeps (`lakecache holder`); it "
                    "survives this process. With --takeover: the holder to ask");
  mount->add_flag("--takeover", s->mount_req.takeover,
                  "`mount --takeover MOUNTPOINT`: this binary takes the live mount over, with "
                  "its server's arguments, and readers see only a pause");
  AddMetricsFlag(mount, s->mount_req.metrics_listen, "");
  mount->add_flag("--insecure", s->mount_req.insecure,
                  "Serve --metrics-listen beyond loopback without a metrics token (warns)");
  // Internal, for the process that holds a mount's FUSE connection: not in --help.
  mount->add_option("--fuse-fd", s->mount_req.fuse_fd)->group("");
  mount->add_option("--fuse-init", s->mount_req.fuse_init)->group("");
  mount->add_option("--state-fd", s->mount_req.state_fd)->group("");

  std::vector<std::string> args(argv, argv + argc);
  return {{mount, [s, args](const GlobalFlags& global) {
             if (Status st = RejectSecretOverrides(s->mount_o); !st.ok()) return ReportError(st);
             if (Status st = SplitMountArgs(s->mount_first, s->mount_second, &s->mount_req);
                 !st.ok()) {
               return ReportError(st);
             }
             GlobalFlags flags = global;
             flags.overrides.insert(flags.overrides.end(), s->mount_o.begin(), s->mount_o.end());
             s->mount_req.argv = args;
             return RunMount(flags, s->mount_req);
           }}};
}

}  // namespace lakecache::cli
