#include "cli/command_line.h"
#include "cli/commands.h"

namespace lakecache::cli {
namespace {

Subcommand AddMaster(CLI::App& app) {
  auto request = std::make_shared<MasterRequest>();
  MasterRequest& master_req = *request;
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
                   "or still electing); it says so in its log meanwhile")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str();
  master
      ->add_option("--election-ttl", master_req.election_ttl,
                   "seconds of the leader's lease in etcd: a dead leader is replaced within two")
      ->check(CLI::Range(2, 600))
      ->capture_default_str();
  master
      ->add_option("--status-interval", master_req.status_interval,
                   "How often the status page samples the workers (at least 100ms)")
      ->type_name("DURATION")
      ->capture_default_str();
  master->add_option("--metadata-dir", master_req.metadata_dir,
                     "Folder of the on-disk index of listings: listings beyond --metadata-memory "
                     "live there, and a restarted master serves what it had listed (by the usual "
                     "TTL rules) without listing the store again; default: none, all in memory");
  master
      ->add_option("--metadata-memory", master_req.metadata_memory,
                   "Listings the master keeps in memory with --metadata-dir (shared evenly "
                   "among the namespaces)")
      ->type_name("SIZE")
      ->capture_default_str();
  return {master, [request](const GlobalFlags& flags) { return RunMaster(flags, *request); }};
}

Subcommand AddWorker(CLI::App& app) {
  auto request = std::make_shared<WorkerRequest>();
  WorkerRequest& worker_req = *request;
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
  return {worker, [request](const GlobalFlags& flags) { return RunWorker(flags, *request); }};
}

std::vector<Subcommand> AddCluster(CLI::App& app) {
  auto up_request = std::make_shared<ClusterUpRequest>();
  auto down_dir = std::make_shared<std::string>();
  auto status_request = std::make_shared<ClusterStatusRequest>();
  ClusterUpRequest& up_req = *up_request;
  ClusterStatusRequest& status_req = *status_request;
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
  down->add_option("--dir", *down_dir, "The folder given to `cluster up`")->required();
  CLI::App* cluster_status = cluster->add_subcommand(
      "status", "Show the master's epoch and each worker's capacity, usage, blocks and fetches");
  cluster_status
      ->add_option("--master", status_req.master,
                   "HOST:PORT of the master (or " + std::string(kMasterEnv) + ")")
      ->envname(kMasterEnv);
  cluster_status->add_flag("--json", status_req.json, "Print one JSON object instead of a table");
  AddCredentialsFlag(cluster_status, status_req.credentials,
                     "the cluster's credentials; calls as the admin role");
  return {
      {up, [up_request](const GlobalFlags& flags) { return RunClusterUp(flags, *up_request); }},
      {down, [down_dir](const GlobalFlags&) { return RunClusterDown(*down_dir); }},
      {cluster_status,
       [status_request](const GlobalFlags& flags) {
         status_request->timeout = flags.timeout;
         return RunClusterStatus(*status_request);
       }},
  };
}

}  // namespace

std::vector<Subcommand> AddServerCommands(CLI::App& app) {
  std::vector<Subcommand> out = {AddMaster(app), AddWorker(app)};
  for (Subcommand& c : AddCluster(app)) out.push_back(std::move(c));
  return out;
}

}  // namespace lakecache::cli
