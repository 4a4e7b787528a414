// The CLI's commands. Each returns the process exit code (see cli_context.h) and writes its result
// to stdout, errors to stderr.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/cache_flags.h"
#include "cli/cli_context.h"
#include "security/credentials_dir.h"

namespace lakecache::cli {

// Like `aws s3 ls`: one entry per line; folders end in '/'. Recursive lists every key under the
// URI.
int RunLs(const CliContext& ctx, const std::string& uri, bool recursive);

// Size, ETag and modification time of an object (or "directory" for a prefix).
int RunStat(const CliContext& ctx, const std::string& uri);

// Writes the object, or the inclusive byte range "A-B" / "A-", to stdout.
int RunCat(const CliContext& ctx, const std::string& uri, const std::string& range);

// Servers listen on loopback by default: beyond it, without --credentials, anyone who can reach
// a worker's port can read every cached byte (so that needs --insecure).
// The release, as --version and lakecache_build_info{version} show it.
inline constexpr char kVersionNumber[] = "0.1.0";

constexpr char kDefaultMasterListen[] = "127.0.0.1:7400";
constexpr char kDefaultWorkerListen[] = "127.0.0.1:0";  // any free port; registered with the master
constexpr char kEtcdPasswordEnv[] = "LAKECACHE_ETCD_PASSWORD";  // --etcd-user's password
constexpr char kMasterEnv[] = "LAKECACHE_MASTER";               // stands in for --master everywhere
// Stands in for --credentials DIR (the cluster's CA, certificates and role tokens:
// security/auth.h).
constexpr char kCredentialsEnv[] = "LAKECACHE_CREDENTIALS";

struct MasterRequest {
  std::string listen = kDefaultMasterListen;
  std::string address_file;    // when set, the announced HOST:PORT is written there once listening
  std::string credentials;     // --credentials DIR: TLS, role tokens, worker certificates
  bool insecure = false;       // --insecure: serve plain text beyond loopback anyway (warns)
  std::string advertise;       // --advertise HOST:PORT; empty: POD_IP and the bound port, or bound
  std::string health_socket;   // --health-socket PATH: the local health check; empty: none
  std::string metrics_listen;  // --metrics-listen HOST:PORT: /metrics and the status page
  std::string etcd;            // --etcd URL[,URL...]: membership and election there; empty: none
  std::string etcd_prefix = "/lakecache/default/";  // --etcd-prefix: the cluster's keys
  // TLS to etcd (--etcd-ca, --etcd-cert, --etcd-key) and its authentication (--etcd-user, the
  // password from --etcd-password-file or LAKECACHE_ETCD_PASSWORD, never a flag's value).
  std::string etcd_ca, etcd_cert, etcd_key, etcd_user, etcd_password_file;
  int election_ttl = 10;  // --election-ttl SECONDS: the leader's lease
  int etcd_wait = 60;     // --etcd-wait SECONDS: how long a start waits for etcd to answer
  // --status-interval DURATION: how often the status page samples the workers (tests: faster).
  std::string status_interval = "2s";
  // --metadata-dir DIR: the on-disk index of listings (kept across restarts); empty: none.
  std::string metadata_dir;
  std::string metadata_memory = "512MiB";  // --metadata-memory SIZE: listings in memory, with it
};
// Serves until SIGINT/SIGTERM. Needs --config (namespaces with their credentials).
int RunMaster(const GlobalFlags& flags, const MasterRequest& request);

struct WorkerRequest {
  std::string master;  // HOST:PORT of the master (--master or LAKECACHE_MASTER)
  std::string listen = kDefaultWorkerListen;
  std::string address_file;  // when set, the announced HOST:PORT is written there once listening
  CacheFlags cache_flags;    // --cache-dir, --cache-size, --mem-cache over the config's `cache`
  std::string node_socket;   // --node-socket
  std::vector<uint32_t> shm_uids;  // --shm-uid (repeatable)
  bool no_shared_memory = false;   // --no-shared-memory
  std::string data_listen;         // the bulk data path's HOST:PORT; empty: listen's host, any port
  std::string credentials;         // --credentials DIR: TLS and the worker role; empty: plain text
  bool insecure = false;           // --insecure: serve plain text beyond loopback anyway (warns)
  std::string advertise;       // --advertise HOST:PORT; empty: POD_IP and the bound port, or bound
  std::string health_socket;   // --health-socket PATH: the local health check; empty: none
  std::string metrics_listen;  // --metrics-listen HOST:PORT: /metrics; empty: none
};
// Serves until SIGINT/SIGTERM, then writes its queued blocks to disk and exits.
int RunWorker(const GlobalFlags& flags, const WorkerRequest& request);

struct ClusterUpRequest {
  std::string dir;  // state, caches and logs of the local cluster
  int workers = 1;
  CacheFlags cache_flags;  // per worker; the cache dirs are DIR/worker-N/cache
  bool insecure = false;   // --insecure: plain text, no tokens (else DIR holds the credentials)
  // --metrics-listen HOST:PORT: the master's /metrics and status page (the workers serve none:
  // the status page shows them); with credentials, DIR/metrics.token is asked for.
  std::string metrics_listen;
};
// Starts a master and N workers on loopback and returns once the master sees them all; prints
// the master's HOST:PORT alone on the last line of stdout.
int RunClusterUp(const GlobalFlags& flags, const ClusterUpRequest& request);
// Unmounts the mounts of the cluster `cluster up --dir DIR` started (cluster_mounts.h), then stops
// its servers.
int RunClusterDown(const std::string& dir);

struct ClusterStatusRequest {
  std::string master;       // HOST:PORT of the master (--master or LAKECACHE_MASTER)
  bool json = false;        // one JSON object instead of a table
  std::string credentials;  // --credentials DIR: calls as the admin role
  // --timeout: for the master's answer.
  Duration timeout = kDefaultTimeout;
};
// The master's view (epoch, live workers) and each worker's Stats: capacity, usage, blocks per
// tier, object-store fetches, blocks served. A worker that does not answer is listed as
// unreachable, not an error; a master that does not answer exits 1 naming its address.
int RunClusterStatus(const ClusterStatusRequest& request);

struct MountRequest {
  std::string
      uri;  // quick form: the one source, shown at the mountpoint's root; empty with --config
  std::string mountpoint;
  CacheFlags cache_flags;
  std::string read_ahead;     // --read-ahead SIZE; empty: the config's client.read_ahead_max
  std::string memory_budget;  // --memory-budget SIZE; empty: the config's client.memory_budget
  bool background = false;
  std::string master;       // cluster mode: HOST:PORT of the master; empty: standalone
  std::string credentials;  // cluster mode: --credentials DIR, calls as the client role
  std::vector<uint32_t>
      allow_uids;  // --allow-uid (repeatable): who else may use the control socket
  // Serve an inherited /dev/fuse descriptor another process mounted and holds (fuse/fuse_mount.h
  // Adopt), with the INIT saved in fuse_init (replayed when the file exists, else captured there).
  int fuse_fd = -1;
  std::string fuse_init;
  int state_fd = -1;  // the held MountJournal (fs/mount_journal.h) the servers share
  // --holder SOCKET: serve the mount the holder there keeps (mount/mount_holder.h); with
  // --takeover, the holder to ask.
  std::string holder;
  bool takeover = false;          // --takeover MOUNTPOINT: this binary takes the live mount over
  std::string metrics_listen;     // --metrics-listen HOST:PORT: /metrics; empty: none
  bool insecure = false;          // --insecure: serve --metrics-listen beyond loopback anyway
  std::vector<std::string> argv;  // the command line, for the servers a holder starts
};

// `lakecache holder --socket PATH`: holds the mount its first server asks for, for the servers
// that come after (a Kubernetes FUSE pod's restarts); ends, unmounting, on SIGTERM.
struct HolderRequest {
  std::string socket;
};
int RunHolder(const HolderRequest& request);

// Mounts and serves until unmounted (foreground), or returns once the daemon's mount is ready.
int RunMount(const GlobalFlags& flags, const MountRequest& request);
int RunUmount(const std::string& mountpoint);
// Where a background mount of `mountpoint` logs when --log-file is not given: a file of its own in
// /tmp, named after the uid and the mountpoint.
std::string DefaultMountLogFile(const std::string& mountpoint);

// The admin commands (docs/admin.md). PATH picks the cache: a path inside a lakecache mount is
// that mount, otherwise /NAMESPACE/PATH of the cluster at `master`.
struct AdminCommand {
  std::string path;
  std::string master;       // --master or LAKECACHE_MASTER
  std::string credentials;  // --credentials DIR: a cluster is called as the admin role
  bool recursive = false;
  bool json = false;
  // --timeout: each call's answer (a load's: its start).
  Duration timeout = kDefaultTimeout;
};
struct LoadCommand : AdminCommand {
  bool metadata_only = false;
  uint32_t replicas = 1;
};
// Caches a path's listings and data; progress on stderr, the report on stdout. Exit 0 when
// nothing failed, 1 when something did, 2 for a bad or missing path, 130 when interrupted.
int RunLoad(const LoadCommand& cmd);
// Per worker (or the mount): capacity and use per tier, hit ratio, cached bytes per namespace.
int RunReport(const AdminCommand& cmd);
// Evicts a path's cached blocks and unpins its listings.
int RunFree(const AdminCommand& cmd);
// A path's size, ETag and cached blocks out of the total.
int RunPathStat(const AdminCommand& cmd);

struct CertRequest {
  std::string dir;                      // --dir: the credentials folder
  security::CredentialOptions options;  // --name, --days, --renew, --force
};
// Makes the credentials folder's missing files, or renews tls.crt (security/credentials_dir.h), and
// prints which files it wrote and kept, never what is in them.
int RunCert(const CertRequest& request);

struct HealthRequest {
  std::string mountpoint;      // a mount's health (its control socket), or
  std::string socket;          // --socket: a master's or worker's --health-socket
  bool live = false;           // --live: answering is enough (liveness), serving not needed
  std::string timeout = "5s";  // --timeout: how long to wait for an answer
};
// Exit 0 when the daemon serves (a worker: registered and heard from by its master; a mount: it
// answers, and so does its master), printing why; 1 with the reason on stderr otherwise.
int RunHealth(const HealthRequest& request);

// Prints the effective config with secrets redacted.
int RunConfigShow(const CliContext& ctx);

}  // namespace lakecache::cli
