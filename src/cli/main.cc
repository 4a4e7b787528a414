// lakecache: one binary, subcommands. This file only wires flags to commands.
#include <CLI/CLI.hpp>

#include <malloc.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "cli/commands.h"
#include "cli/mount_options.h"
#include "cli/unknown_command.h"
#include "common/idle_trim.h"
#include "common/logging.h"
#include "rpc/grpc_log.h"

namespace lakecache::cli {
namespace {

const std::string kVersion = std::string("lakecache ") + kVersionNumber;

// Values given on the command line show in `ps`; secrets must come from a file or the environment.
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

// --timeout: a duration above zero.
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

// --insecure and --advertise, the same on the master and the workers.
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

// Network buffers (gRPC's, curl's) of a MiB or more come and go by the thousand per second in a
// mount or worker. glibc would map each one afresh (and the kernel zero it page by page); kept in
// the heap, freed buffers are reused. Blocks do not come from the heap (see cache/block.h).
//
// The price is what the heap keeps: freed memory stays in each of glibc's arenas (up to 8 per
// core) at the high-water mark of the threads that use it, so a long-running daemon's RSS creeps
// up for hours (measured by bench/soak: a mount's server from 266 to 385 MB of heap in 10 minutes,
// of which malloc_trim gave back 204 MB). So a thread hands the free pages of every arena back to
// the kernel once every 30 s: the next minute's buffers fault a few pages in again, and the RSS
// stays at what is in use. (A background mount's holder, forked without exec, has no such
// thread: it allocates little; the servers it starts are new processes.) The same thread first
// runs the idle trims (common/idle_trim.h): block mappings pooled for 30 s and S3 connections idle
// for a minute go back.
//
// malloc_trim never shrinks the free top of a thread's arena: glibc does that only on a free, once
// the top passes M_TRIM_THRESHOLD. So each arena may keep up to that threshold resident after its
// threads' last burst (bench/soak saw 12 MB tops over 35 KB in use in a worker, and a mount's
// server holding 230 MB of arenas over 48 MB in use). The threshold is 4 MiB (a buffer of a few
// MiB that comes and goes stays mapped) and there are at most 2 arenas per core (at least 4), so
// what the tops can keep is bounded and reached within minutes, not hours.
void TuneAllocator() {
  ::mallopt(M_MMAP_THRESHOLD, 64 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 4 << 20);
  ::mallopt(M_ARENA_MAX, static_cast<int>(std::max(4u, 2 * std::thread::hardware_concurrency())));
  // With every signal blocked: a process that waits for its signals with signalfd (a mount's
  // holder waits for SIGCHLD) only sees those no thread of it takes.
  sigset_t all, before;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &before);
  std::thread([] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::seconds(30));
      RunIdleTrims();  // pooled block mappings and S3 connections unused for a while go first
      ::malloc_trim(0);
    }
  }).detach();
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

int Main(int argc, char** argv) {
  TuneAllocator();
  CLI::App app{"lakecache: a distributed cache for object storage, for ML training on data lakes",
               "lakecache"};
  app.set_version_flag("--version", kVersion);
  app.require_subcommand(1);
  app.fallthrough();
  GlobalFlags flags;
  std::string timeout = FormatDuration(kDefaultTimeout);
  AddGlobalFlags(app, flags, timeout);

  std::string uri, range;
  bool recursive = false;
  CLI::App* ls = app.add_subcommand("ls", "List objects and folders under a URI, like `aws s3 ls`");
  ls->add_option("uri", uri, "s3://bucket/prefix, oss://bucket/prefix or file:///dir")->required();
  ls->add_flag("-R,--recursive", recursive, "List every key under the prefix");
  AdminCommand stat_cmd;
  CLI::App* stat = app.add_subcommand(
      "stat", "Size, ETag and modification time; for a cached path also its cached blocks");
  stat->add_option("path", stat_cmd.path,
                   "s3://bucket/key (the store), a path in a lakecache mount, or /NAMESPACE/PATH "
                   "of the cluster at --master")
      ->required();
  AddAdminFlags(stat, stat_cmd);
  CLI::App* cat = app.add_subcommand("cat", "Write an object (or a byte range of it) to stdout");
  cat->add_option("uri", uri, "s3://bucket/key")->required();
  cat->add_option("--range", range, "Inclusive byte range FIRST-LAST or FIRST-, as in HTTP");
  std::string mount_first, mount_second;
  std::vector<std::string> mount_o;
  MountRequest mount_req;
  CLI::App* mount = app.add_subcommand(
      "mount",
      "Mount object storage as a folder (read-write where the namespaces allow writes): `mount "
      "s3://bucket[/prefix] MOUNTPOINT` "
      "or `mount --config FILE MOUNTPOINT` (each namespace a top-level folder), or `mount "
      "--master HOST:PORT MOUNTPOINT` (every namespace of a cluster)");
  mount->add_option("URI", mount_first,
                    "s3://bucket[/prefix], oss://bucket[/prefix] or file:///dir, shown at the "
                    "mountpoint's root (with --config, the settings of the file's namespace "
                    "over it, if any); not with --master");
  mount->add_option("MOUNTPOINT", mount_second, "An existing empty folder");
  mount
      ->add_option("-o", mount_o,
                   "Mount options (comma-separated) or a config override KEY=VALUE; listed below")
      ->type_name("OPTION")
      ->allow_extra_args(false);
  mount->footer("Mount options (-o):\n" + MountOptionsHelp() +
                "\nStart-up: each namespace's store (or, with --master, the master) must answer "
                "within --timeout (a global flag, default 30s), or the mount fails before anything "
                "is mounted; on a terminal a line says what it still waits for.\n");
  mount->add_option("--cache-dir", mount_req.cache_flags.cache_dir,
                    "Disk cache directory, e.g. /var/cache/lakecache (default: memory only)");
  mount->add_option("--cache-size", mount_req.cache_flags.cache_size,
                    "Capacity of --cache-dir (default 10GiB)");
  mount->add_option("--mem-cache", mount_req.cache_flags.mem_cache,
                    "Memory cache capacity (default 1GiB)");
  mount->add_option("--read-ahead", mount_req.read_ahead,
                    "Largest read-ahead window of a sequential reader, e.g. 64MiB (0: none)");
  mount->add_option("--memory-budget", mount_req.memory_budget,
                    "Memory for in-flight and prefetched blocks, all files together (default "
                    "512MiB)");
  mount->add_flag("--background", mount_req.background,
                  "Return once the mount is ready, saying where it logs: --log-file, by default "
                  "/tmp/lakecache-mount-UID-MOUNTPOINT-HASH.log");
  mount
      ->add_option("--master", mount_req.master,
                   "Cluster mode: read through the workers of the master at HOST:PORT (or " +
                       std::string(kMasterEnv) + "); `mount --master ADDR MOUNTPOINT`")
      ->envname(kMasterEnv);
  AddCredentialsFlag(mount, mount_req.credentials,
                     "the cluster's credentials (cluster mode); calls as the client role");

  mount
      ->add_option("--allow-uid", mount_req.allow_uids,
                   "A uid whose admin commands (load, free, report, stat) the mount's control "
                   "socket serves, besides the mount's own and root (repeatable; adds to "
                   "client.allow_uids)")
      ->check(CLI::Range(0u, 4294967294u));
  mount->add_option("--holder", mount_req.holder,
                    "Serve the mount the holder at this socket keeps (`lakecache holder`); it "
                    "survives this process. With --takeover: the holder to ask");
  mount->add_flag("--takeover", mount_req.takeover,
                  "`mount --takeover MOUNTPOINT`: this binary takes the live mount over, with "
                  "its server's arguments, and readers see only a pause");
  AddMetricsFlag(mount, mount_req.metrics_listen, "");
  mount->add_flag("--insecure", mount_req.insecure,
                  "Serve --metrics-listen beyond loopback without a metrics token (warns)");
  // Internal, for the process that holds a mount's FUSE connection: not in --help.
  mount->add_option("--fuse-fd", mount_req.fuse_fd)->group("");
  mount->add_option("--fuse-init", mount_req.fuse_init)->group("");
  mount->add_option("--state-fd", mount_req.state_fd)->group("");

  MasterRequest master_req;
  CLI::App* master = app.add_subcommand(
      "master", "Run the master: namespaces, worker membership, shared metadata (needs --config)");
  master
      ->add_option("--listen", master_req.listen,
                   "HOST:PORT to serve on (beyond loopback: needs --credentials or --insecure)")
      ->capture_default_str();
  master->add_option("--address-file", master_req.address_file,
                     "Write the announced HOST:PORT to this file once listening");
  AddCredentialsFlag(master, master_req.credentials,
                     "the cluster's CA (with ca.key), tls.crt/tls.key and role tokens: TLS and "
                     "authentication on every call");
  AddExposureFlags(master, master_req.insecure, master_req.advertise, "master");
  AddHealthSocketFlag(master, master_req.health_socket);
  AddMetricsFlag(master, master_req.metrics_listen, " and the status page (/)");
  master->add_option("--etcd", master_req.etcd,
                     "etcd's members (HOST:PORT or http(s)://HOST:PORT, comma-separated): the "
                     "workers' membership is kept there and the masters elect a leader, so "
                     "several masters serve one cluster; without it this master is alone");
  master->add_option("--etcd-prefix", master_req.etcd_prefix,
                     "where the cluster's keys live in etcd (default /lakecache/default/; one "
                     "prefix per cluster sharing an etcd)");
  master->add_option("--etcd-ca", master_req.etcd_ca,
                     "CA file that signed etcd's certificates (https:// endpoints; default: the "
                     "system's)");
  master->add_option("--etcd-cert", master_req.etcd_cert,
                     "client certificate for etcd members that ask for one (with --etcd-key)");
  master->add_option("--etcd-key", master_req.etcd_key, "the client certificate's key");
  master->add_option("--etcd-user", master_req.etcd_user,
                     "etcd user (etcd's authentication); the password comes from "
                     "--etcd-password-file or " +
                         std::string(kEtcdPasswordEnv));
  master->add_option("--etcd-password-file", master_req.etcd_password_file,
                     "file holding the etcd user's password (one line)");
  master
      ->add_option("--etcd-wait", master_req.etcd_wait,
                   "seconds a starting master waits for etcd to answer (etcd started beside it, "
                   "or still electing); it says so in its log meanwhile. Default 60")
      ->check(CLI::Range(0, 3600));
  master
      ->add_option("--election-ttl", master_req.election_ttl,
                   "seconds of the leader's lease in etcd: a dead leader is replaced within two")
      ->check(CLI::Range(2, 600))
      ->capture_default_str();

  WorkerRequest worker_req;
  CLI::App* worker = app.add_subcommand(
      "worker", "Run a worker: caches blocks in memory and on disk and serves them to clients");
  worker
      ->add_option("--master", worker_req.master,
                   "HOST:PORT of the master (or " + std::string(kMasterEnv) + ")")
      ->envname(kMasterEnv)
      ->required();
  worker
      ->add_option("--listen", worker_req.listen,
                   "HOST:PORT to serve on; port 0 picks a free one (beyond loopback: needs "
                   "--credentials or --insecure)")
      ->capture_default_str();
  AddExposureFlags(worker, worker_req.insecure, worker_req.advertise, "worker");
  AddHealthSocketFlag(worker, worker_req.health_socket);
  AddMetricsFlag(worker, worker_req.metrics_listen, "");
  worker->add_option("--node-socket", worker_req.node_socket,
                     "Unix socket where mounts on this host map the memory cache (default "
                     "/tmp/lakecache-node-<worker id>.sock)");
  worker->add_option("--shm-uid", worker_req.shm_uids,
                     "A uid whose mounts may map the memory cache (repeatable; default: the "
                     "worker's own uid)");
  worker->add_flag("--no-shared-memory", worker_req.no_shared_memory,
                   "Keep the memory cache private: co-located mounts read over the network");
  worker->add_option("--address-file", worker_req.address_file,
                     "Write the announced HOST:PORT to this file once listening");
  worker->add_option("--cache-dir", worker_req.cache_flags.cache_dir,
                     "Disk cache directory (default: the config's cache.disks, else memory only)");
  worker->add_option("--cache-size", worker_req.cache_flags.cache_size,
                     "Capacity of --cache-dir (default 10GiB)");
  worker->add_option("--mem-cache", worker_req.cache_flags.mem_cache,
                     "Memory cache capacity (default 1GiB)");
  worker->add_option("--data-listen", worker_req.data_listen,
                     "HOST:PORT of the bulk data path (block reads over framed TCP; default: the "
                     "--listen host, any free port)");
  AddCredentialsFlag(worker, worker_req.credentials,
                     "ca.crt and worker.token: the worker gets its own certificate from the "
                     "master and serves TLS");

  ClusterUpRequest up_req;
  std::string down_dir;
  CLI::App* cluster = app.add_subcommand("cluster", "Run a local cluster on this machine");
  cluster->require_subcommand(1);
  CLI::App* up = cluster->add_subcommand(
      "up", "Start a master and N workers on loopback (needs --config); prints the master address");
  up->fallthrough();
  up->add_option("--dir", up_req.dir, "Folder for the cluster's state, caches and logs")
      ->required();
  up->add_option("--workers", up_req.workers, "Number of workers")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  up->add_option("--cache-size", up_req.cache_flags.cache_size,
                 "Disk cache of each worker, in DIR/worker-N/cache (default 10GiB)");
  up->add_option("--mem-cache", up_req.cache_flags.mem_cache,
                 "Memory cache of each worker (default 1GiB)");
  up->add_flag("--insecure", up_req.insecure,
               "Plain text, no tokens (loopback only); by default DIR gets a CA, certificates and "
               "role tokens, and clients take --credentials DIR");
  up->add_option("--metrics-listen", up_req.metrics_listen,
                 "HOST:PORT where the master serves its status page (/) and /metrics (default: "
                 "none); with credentials every request presents DIR/metrics.token");
  CLI::App* down = cluster->add_subcommand(
      "down", "Unmount the cluster's mounts on this host, then stop the cluster started in --dir");
  down->add_option("--dir", down_dir, "The folder given to `cluster up`")->required();
  ClusterStatusRequest status_req;
  CLI::App* cluster_status = cluster->add_subcommand(
      "status", "Show the master's epoch and each worker's capacity, usage, blocks and fetches");
  cluster_status
      ->add_option("--master", status_req.master,
                   "HOST:PORT of the master (or " + std::string(kMasterEnv) + ")")
      ->envname(kMasterEnv);
  cluster_status->add_flag("--json", status_req.json, "Print one JSON object instead of a table");
  AddCredentialsFlag(cluster_status, status_req.credentials,
                     "the cluster's credentials; calls as the admin role");

  LoadCommand load_cmd;
  CLI::App* load = app.add_subcommand(
      "load", "Preload a file or folder into the cache: listings, attributes and data");
  load->add_option("path", load_cmd.path,
                   "A path in a lakecache mount, or /NAMESPACE/PATH of the cluster at --master")
      ->required();
  AddAdminFlags(load, load_cmd);
  load->add_flag("-R,--recursive", load_cmd.recursive, "The whole tree below the folder");
  load->add_flag("--metadata-only", load_cmd.metadata_only,
                 "Cache the listings and attributes only, no data");
  load->add_option("--replica", load_cmd.replicas,
                   "Copies of each block, on the first N workers in placement order")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  AdminCommand report_cmd;
  CLI::App* report = app.add_subcommand(
      "report", "Workers, capacity and use per tier, hit ratio, cached bytes per namespace");
  report->add_option("path", report_cmd.path, "A path in a lakecache mount (default: the cluster)");
  AddAdminFlags(report, report_cmd);
  AdminCommand free_cmd;
  CLI::App* free_path = app.add_subcommand("free", "Evict a file or folder from the cache");
  free_path
      ->add_option("path", free_cmd.path,
                   "A path in a lakecache mount, or /NAMESPACE/PATH of the cluster at --master")
      ->required();
  AddAdminFlags(free_path, free_cmd);
  free_path->add_flag("-R,--recursive", free_cmd.recursive, "The whole tree below the folder");

  CertRequest cert_req;
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

  HealthRequest health_req;
  CLI::App* health = app.add_subcommand(
      "health", "Exit 0 when the local master, worker or mount serves (a Kubernetes exec probe)");
  health->add_option("mountpoint", health_req.mountpoint, "A lakecache mount's folder");
  health->add_option("--socket", health_req.socket,
                     "The --health-socket of a master or worker on this host");
  health->add_flag("--live", health_req.live,
                   "Answering is enough (a liveness probe): a worker whose master is away passes");
  health->add_option("--timeout", health_req.timeout, "How long to wait for an answer (e.g. 500ms)")
      ->capture_default_str();

  HolderRequest holder_req;
  CLI::App* holder = app.add_subcommand(
      "holder",
      "Hold a mount for its servers (`lakecache mount --holder SOCKET`), so it survives their "
      "restarts; mounts when the first asks, unmounts on SIGTERM");
  holder->add_option("--socket", holder_req.socket, "The Unix socket servers connect to")
      ->required();

  std::string umount_point;
  CLI::App* umount = app.add_subcommand("umount", "Unmount a lakecache mount");
  umount->add_option("mountpoint", umount_point, "The folder it is mounted at")->required();
  CLI::App* config = app.add_subcommand("config", "Configuration tools");
  config->require_subcommand(1);
  CLI::App* show = config->add_subcommand("show", "Print the effective config, secrets redacted");
  show->fallthrough();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::string unknown = e.get_exit_code() != 0 ? UnknownCommandMessage(app) : "";
    if (!unknown.empty()) {
      std::fprintf(stderr, "lakecache: error: %s\n", unknown.c_str());
      return kExitUsage;
    }
    int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  if (Status s = InitLogging(flags.log_level, flags.log_file); !s.ok()) return ReportError(s);
  rpc::RouteGrpcLogs();
  if (Status s = ParseTimeout(timeout, &flags.timeout); !s.ok()) return ReportError(s);
  if (Status s = RejectSecretOverrides(flags.overrides); !s.ok()) return ReportError(s);
  if (Status s = RejectSecretOverrides(mount_o); !s.ok()) return ReportError(s);
  if (*mount) {
    if (Status s = SplitMountArgs(mount_first, mount_second, &mount_req); !s.ok()) {
      return ReportError(s);
    }
    flags.overrides.insert(flags.overrides.end(), mount_o.begin(), mount_o.end());
    mount_req.argv.assign(argv, argv + argc);
    return RunMount(flags, mount_req);
  }
  if (*cert) return RunCert(cert_req);
  if (*health) return RunHealth(health_req);
  if (*umount) return RunUmount(umount_point);
  if (*holder) return RunHolder(holder_req);
  if (*master) return RunMaster(flags, master_req);
  if (*worker) return RunWorker(flags, worker_req);
  if (*up) return RunClusterUp(flags, up_req);
  if (*down) return RunClusterDown(down_dir);
  status_req.timeout = flags.timeout;
  if (*cluster_status) return RunClusterStatus(status_req);
  for (AdminCommand* c :
       {static_cast<AdminCommand*>(&load_cmd), &report_cmd, &free_cmd, &stat_cmd}) {
    c->timeout = flags.timeout;
  }
  if (*load) return RunLoad(load_cmd);
  if (*report) return RunReport(report_cmd);
  if (*free_path) return RunFree(free_cmd);
  if (*stat && stat_cmd.path.find("://") == std::string::npos) return RunPathStat(stat_cmd);

  CliContext ctx(flags);
  if (*ls) return RunLs(ctx, uri, recursive);
  if (*stat) return RunStat(ctx, stat_cmd.path);
  if (*cat) return RunCat(ctx, uri, range);
  if (*show) return RunConfigShow(ctx);
  return kExitUsage;
}

}  // namespace
}  // namespace lakecache::cli

int main(int argc, char** argv) { return lakecache::cli::Main(argc, argv); }
