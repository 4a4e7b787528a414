#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "cache/block_store.h"
#include "cache/memory_tier.h"
#include "cli/commands.h"
#include "cli/credentials_flag.h"
#include "cli/mount_options.h"
#include "cli/mount_table.h"
#include "client/cluster_client.h"
#include "client/cluster_store.h"
#include "client/mount_admin.h"
#include "client/node_tier.h"
#include "common/cache_flags.h"
#include "common/logging.h"
#include "fuse/fuse_mount.h"
#include "meta/namespace_table.h"
#include "rpc/x509.h"
#include "ufs/retrying_store.h"

namespace lakecache::cli {
namespace {

// The memory cache of a cluster-mode mount when --mem-cache is not given: the blocks being read
// and those just read; the workers cache the rest.
constexpr uint64_t kClusterMountMemCache = 256ull << 20;

int MountpointError(const std::string& message) {
  std::fprintf(stderr, "lakecache: error: %s\n", message.c_str());
  return kExitUsage;
}

// A lakecache mount at `path` already: a live one, or the stale one a killed mount leaves (every
// access fails with ENOTCONN until it is unmounted).
int CheckNotMounted(const std::string& path) {
  if (MountTypeAt(NormalizedPath(path)) != kLakecacheFsType) return kExitOk;
  struct stat st;
  std::string fix = "unmount it with `lakecache umount " + path + "`, then mount again";
  if (::stat(path.c_str(), &st) != 0 && errno == ENOTCONN) {
    return MountpointError(path +
                           " is a stale lakecache mount: the process that served it is gone (" +
                           std::strerror(ENOTCONN) + "); " + fix);
  }
  return MountpointError(path + " is a lakecache mount already; " + fix);
}

// A mountpoint must be an existing, empty folder: mounting over files would hide them.
int CheckMountpoint(const std::string& path) {
  if (int rc = CheckNotMounted(path); rc != kExitOk) return rc;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    std::fprintf(stderr, "lakecache: error: mountpoint %s does not exist or is not a folder\n",
                 path.c_str());
    return kExitUsage;
  }
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) {
    std::fprintf(stderr, "lakecache: error: cannot open mountpoint %s: %s\n", path.c_str(),
                 std::strerror(errno));
    return kExitFailure;
  }
  bool empty = true;
  while (dirent* e = ::readdir(dir)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) empty = false;
  }
  ::closedir(dir);
  if (!empty) {
    std::fprintf(stderr, "lakecache: error: mountpoint %s is not empty\n", path.c_str());
    return kExitUsage;
  }
  return kExitOk;
}

// The quick form's config: the URI's namespace, with the -o overrides applied through the same
// loader as a file's (so they are validated the same way). Credentials are kept out of the rendered
// text and carried over afterwards.
Result<Config> QuickConfig(const NamespaceConfig& ns, const Config& file_config,
                           const std::vector<std::string>& overrides) {
  std::string own = "namespaces." + ns.name + ".";
  for (const std::string& o : overrides) {
    std::string key = o.substr(0, o.find('='));
    if (key.starts_with("namespaces.") && !key.starts_with(own)) {
      return Status::InvalidArgument("-o " + key + ": this mount has one namespace, '" + ns.name +
                                     "': set its keys as " + own +
                                     "KEY (several namespaces need --config FILE)");
    }
  }
  Config base;
  base.cache = file_config.cache;
  base.client = file_config.client;
  NamespaceConfig plain = ns;
  plain.access_key.clear();
  plain.secret_key = Secret();
  plain.session_token = Secret();
  plain.access_key_file.clear();
  plain.secret_key_file.clear();
  base.namespaces[ns.name] = plain;
  LC_ASSIGN_OR_RETURN(Config config, LoadConfigText(RenderConfig(base), "the mount command line",
                                                    ConfigFormat::kYaml, overrides));
  NamespaceConfig& loaded = config.namespaces[ns.name];
  loaded.access_key = ns.access_key;
  loaded.secret_key = ns.secret_key;
  loaded.session_token = ns.session_token;
  loaded.access_key_file = ns.access_key_file;
  loaded.secret_key_file = ns.secret_key_file;
  return config;
}

// The config a mount serves: the one URI of the quick form, or every namespace of --config.
Result<Config> MountConfig(const CliContext& ctx, const std::string& uri) {
  if (uri.empty()) {
    LC_ASSIGN_OR_RETURN(Config config, ctx.LoadConfig());
    if (config.namespaces.empty()) {
      return Status::InvalidArgument(ctx.flags().config_file + ": no namespaces to mount");
    }
    return config;
  }
  GlobalFlags plain_flags = ctx.flags();
  plain_flags.overrides.clear();  // they apply to the quick form's config, below
  CliContext plain(plain_flags);
  LC_ASSIGN_OR_RETURN(Config file_config, plain.LoadConfig());
  LC_ASSIGN_OR_RETURN(NamespaceConfig ns, plain.NamespaceFor(uri));
  return QuickConfig(ns, file_config, ctx.flags().overrides);
}

// --read-ahead and --memory-budget win over the `client` section.
Status ApplyClientFlags(const MountRequest& req, ClientConfig* client) {
  if (!req.read_ahead.empty()) {
    Result<uint64_t> bytes = ParseByteSize(req.read_ahead);
    if (!bytes.ok()) return Status::InvalidArgument("--read-ahead: " + bytes.status().message());
    client->read_ahead_max = *bytes;
  }
  if (!req.memory_budget.empty()) {
    Result<uint64_t> bytes = ParseByteSize(req.memory_budget);
    if (!bytes.ok() || *bytes == 0) {
      return Status::InvalidArgument("--memory-budget: " + (bytes.ok()
                                                                ? std::string("must be more than 0")
                                                                : bytes.status().message()));
    }
    client->memory_budget = *bytes;
  }
  return Status::Ok();
}

// One line for the log when a mount ends: what it fetched and how the cache did.
void LogCacheStats(const BlockStore& blocks) {
  BlockStoreStats s = blocks.Stats();
  std::string tiers;
  for (const TierStats& t : s.tiers) {
    tiers += " " + t.tier + ".hits=" + std::to_string(t.hits) + " " + t.tier +
             ".misses=" + std::to_string(t.misses);
  }
  spdlog::info(
      "cache stats: fetches={} fetched_bytes={} fetch_errors={} singleflight_waits={} "
      "prefetches={} prefetch_used={} prefetch_dropped={} prefetch_refused={} "
      "budget_peak_bytes={}{}",
      s.fetches, s.fetched_bytes, s.fetch_errors, s.singleflight_waits, s.prefetches,
      s.prefetch_used, s.prefetch_dropped, s.prefetch_refused, s.budget_peak_bytes, tiers);
}

// An empty prefix mounts as an empty folder (writes will fill it), where `ls` of the same URI says
// it does not exist: say why the folder is empty. On stderr, which a background mount still shares
// with its caller at this point.
void WarnEmptyNamespaces(const NamespaceTable& table) {
  for (const std::string& name : table.names()) {
    const Namespace& ns = *table.Find(name);
    if (!ns.probed_empty) continue;
    std::fprintf(stderr,
                 "lakecache: warning: %s holds no objects: namespace '%s' shows as an empty "
                 "folder until objects are written there\n",
                 ns.config.uri.c_str(), name.c_str());
  }
}

struct Mounted {
  std::unique_ptr<FuseMount> mount;
  std::shared_ptr<BlockStore> blocks;
  std::unique_ptr<MountAdmin> admin;  // the control socket; destroyed first
};

// A mount serves long-running jobs: it rides out an outage of several seconds (a store, master or
// worker restart) rather than failing the read, at the price of reporting a dead store more slowly.
RetryPolicy MountRetryPolicy() {
  RetryPolicy policy;
  policy.max_attempts = 10;
  policy.max_backoff = std::chrono::seconds(2);
  return policy;
}

// Cluster mode: every namespace of the master, each read through the workers. The mount keeps only
// a small memory cache of its own (the workers hold the data) and needs no object-store
// credentials.
Result<std::unique_ptr<NamespaceTable>> ClusterNamespaces(const MountRequest& req, Config* config,
                                                          std::shared_ptr<ClusterClient>* out) {
  if (!req.uri.empty()) {
    return Status::InvalidArgument(
        "--master mounts every namespace of the cluster: give only the mountpoint, not " + req.uri);
  }
  if (!req.cache_flags.cache_dir.empty() || !req.cache_flags.cache_size.empty()) {
    return Status::InvalidArgument(
        "--cache-dir/--cache-size: in cluster mode the workers cache on disk; a mount keeps only "
        "a memory cache (--mem-cache)");
  }
  config->cache.disks.clear();
  if (req.cache_flags.mem_cache.empty()) config->cache.memory_capacity = kClusterMountMemCache;
  ClusterClientOptions client_options;
  client_options.short_circuit = config->client.short_circuit;
  client_options.prefault = config->client.shm_prefault;
  client_options.transport = config->client.transport == "grpc"
                                 ? ClusterClientOptions::Transport::kGrpc
                                 : ClusterClientOptions::Transport::kBulk;
  LC_ASSIGN_OR_RETURN(client_options.credentials,
                      OpenCredentials(req.credentials, rpc::Role::kClient, "lakecache mount"));
  LC_ASSIGN_OR_RETURN(std::shared_ptr<ClusterClient> client,
                      ClusterClient::Connect(req.master, client_options));
  *out = client;
  std::vector<NamespaceTable::Source> sources;
  for (const ClusterNamespace& ns : client->namespaces()) {
    NamespaceTable::Source source;
    source.config.name = ns.name;
    source.config.uri = ns.uri;
    source.config.block_size = ns.block_size;
    source.config.metadata_ttl = ns.metadata_ttl;
    source.config.immutable = ns.immutable;
    source.prefix = ns.key_prefix;
    source.store = std::make_shared<RetryingStore>(std::make_shared<ClusterStore>(client, ns),
                                                   MountRetryPolicy());
    sources.push_back(std::move(source));
  }
  if (sources.empty()) {
    return Status::InvalidArgument("the master at " + req.master + " serves no namespaces");
  }
  return NamespaceTable::FromStores(std::move(sources));
}

// Builds the whole stack and mounts it. On success the mount is visible.
// --fuse-fd: serve the held connection, replaying the INIT saved in --fuse-init, or capturing it
// there for the servers after this one.
Status AdoptConnection(FuseMount& mount, const MountRequest& req) {
  if (req.fuse_init.empty()) return Status::InvalidArgument("--fuse-fd needs --fuse-init FILE");
  std::error_code ec;
  if (!std::filesystem::exists(req.fuse_init, ec)) {
    std::string path = req.fuse_init;
    return mount.Adopt(req.fuse_fd, req.mountpoint, nullptr, [path](const FuseInit& init) {
      Status s = rpc::WriteFileAtomically(path, EncodeFuseInit(init), 0600);
      if (!s.ok()) spdlog::error("cannot save the FUSE INIT: {}", s.message());
    });
  }
  std::ifstream in(req.fuse_init, std::ios::binary);
  std::string blob((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LC_ASSIGN_OR_RETURN(FuseInit init, DecodeFuseInit(blob));
  return mount.Adopt(req.fuse_fd, req.mountpoint, &init);
}

Result<Mounted> BuildAndMount(const CliContext& ctx, const MountRequest& req,
                              const MountOptions& options) {
  bool cluster = !req.master.empty();
  Config config;
  if (cluster) {
    // No namespaces of its own: a --config (or just -o client.KEY=VALUE) sets how it reads.
    if (!ctx.flags().config_file.empty()) {
      LC_ASSIGN_OR_RETURN(config, ctx.LoadConfig());
    } else {
      LC_ASSIGN_OR_RETURN(config, LoadConfigText("", "the mount command line", ConfigFormat::kYaml,
                                                 ctx.flags().overrides));
    }
  } else {
    LC_ASSIGN_OR_RETURN(config, MountConfig(ctx, req.uri));
  }
  std::unique_ptr<NamespaceTable> namespaces;
  std::shared_ptr<ClusterClient> client;
  if (cluster) {
    LC_ASSIGN_OR_RETURN(namespaces, ClusterNamespaces(req, &config, &client));
  }
  LC_RETURN_IF_ERROR(ApplyCacheFlags(req.cache_flags, &config.cache));
  LC_RETURN_IF_ERROR(ApplyClientFlags(req, &config.client));
  auto budget = std::make_shared<MemoryBudget>(config.client.memory_budget);
  std::shared_ptr<BlockStore> blocks;
  if (cluster) {
    LC_ASSIGN_OR_RETURN(
        blocks, ClusterBlockStore(client, config.cache, config.client.short_circuit, budget));
  } else {
    LC_ASSIGN_OR_RETURN(std::unique_ptr<BlockStore> opened, BlockStore::Open(config.cache, budget));
    blocks = std::move(opened);
  }
  if (!cluster) {
    StoreOptions store_options = ctx.MakeStoreOptions();
    store_options.retry = MountRetryPolicy();
    LC_ASSIGN_OR_RETURN(namespaces, NamespaceTable::Open(config, store_options, /*probe=*/true));
    WarnEmptyNamespaces(*namespaces);
  }
  FileSystemOptions fs_options = options.fs;
  if (cluster) {
    fs_options.max_run_blocks = 1;
    fs_options.range_reads_when_random = true;
  }
  fs_options.single_namespace_root = !req.uri.empty();
  fs_options.read_ahead_max = config.client.read_ahead_max;
  fs_options.prefetch_threads = config.client.prefetch_threads;
  if (req.state_fd >= 0) {
    Result<std::unique_ptr<MountJournal>> journal = MountJournal::Open(req.state_fd);
    if (!journal.ok()) return journal.status().WithContext("--state-fd");
    fs_options.journal = std::move(*journal);
  }
  auto fs = std::make_shared<FileSystem>(std::move(namespaces), blocks, fs_options);
  FuseMountOptions fuse_options = options.fuse;
  fuse_options.fs_name = cluster           ? "lakecache:cluster:" + req.master
                         : req.uri.empty() ? "lakecache"
                                           : "lakecache:" + req.uri;
  auto mount = std::make_unique<FuseMount>(fs, fuse_options);
  if (req.fuse_fd >= 0) {
    LC_RETURN_IF_ERROR(AdoptConnection(*mount, req));
  } else {
    LC_RETURN_IF_ERROR(mount->Mount(req.mountpoint));
  }
  MountAdminOptions admin_options;
  std::error_code ec;
  admin_options.mountpoint = std::filesystem::canonical(req.mountpoint, ec).string();
  if (ec) admin_options.mountpoint = std::filesystem::absolute(req.mountpoint).string();
  admin_options.socket_path = ControlSocketPath(admin_options.mountpoint);
  admin_options.master = req.master;
  // --allow-uid adds to client.allow_uids.
  admin_options.allow_uids.assign(config.client.allow_uids.begin(), config.client.allow_uids.end());
  admin_options.allow_uids.insert(admin_options.allow_uids.end(), req.allow_uids.begin(),
                                  req.allow_uids.end());
  if (fs_options.single_namespace_root) admin_options.root_namespace = fs->namespaces().names()[0];
  std::string where = "the mount at " + admin_options.mountpoint;
  if (client != nullptr) {
    admin_options.health = [client, where] {
      rpc::HealthState state = client->Health();
      state.detail = where + ": " + state.detail;
      return state;
    };
  } else {
    admin_options.health = [where] { return rpc::HealthState{true, where + " serves"}; };
  }
  auto admin = MountAdmin::Start(fs, admin_options);
  if (!admin.ok()) {
    // The mount still serves reads; only `lakecache load/report/free/stat PATH` cannot reach it.
    spdlog::warn("no control socket for {}: {}", admin_options.mountpoint,
                 admin.status().message());
    return Mounted{std::move(mount), std::move(blocks), nullptr};
  }
  return Mounted{std::move(mount), std::move(blocks), std::move(*admin)};
}

// Serves until unmounted; then the control socket goes (none is left behind) and the cache's
// figures go to the log.
Status Serve(Mounted& mounted) {
  Status s = mounted.mount->Run();
  mounted.admin.reset();
  LogCacheStats(*mounted.blocks);
  return s;
}

int RunForeground(const CliContext& ctx, const MountRequest& req, const MountOptions& options) {
  auto mount = BuildAndMount(ctx, req, options);
  if (!mount.ok()) return ReportError(mount.status());
  std::fprintf(stderr, "lakecache: mounted at %s\n", req.mountpoint.c_str());
  Status s = Serve(*mount);
  return s.ok() ? kExitOk : ReportError(s);
}

// Forks a daemon that mounts and serves; returns once the mount is ready (or failed).
int RunBackground(const CliContext& ctx, const MountRequest& req, const MountOptions& options) {
  int fds[2];
  if (::pipe(fds) != 0) return ReportError(Status::IoError("pipe failed"));
  pid_t pid = ::fork();
  if (pid < 0) return ReportError(Status::IoError("fork failed"));
  if (pid > 0) {  // the caller: wait for the daemon's word
    ::close(fds[1]);
    char code = 1;
    ssize_t n = ::read(fds[0], &code, 1);
    ::close(fds[0]);
    if (n != 1) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      return WIFEXITED(status) && WEXITSTATUS(status) != 0 ? WEXITSTATUS(status) : kExitFailure;
    }
    return code;
  }
  ::close(fds[0]);
  ::setsid();
  std::string log_file =
      ctx.flags().log_file.empty() ? DefaultMountLogFile() : ctx.flags().log_file;
  if (Status s = InitLogging(ctx.flags().log_level, log_file); !s.ok()) {
    std::fprintf(stderr, "lakecache: error: %s\n", s.message().c_str());
    ::_exit(kExitFailure);
  }
  auto mount = BuildAndMount(ctx, req, options);
  if (!mount.ok()) ::_exit(ReportError(mount.status()));  // stderr still reaches the caller
  int devnull = ::open("/dev/null", O_RDWR);
  ::dup2(devnull, STDIN_FILENO);
  ::dup2(devnull, STDOUT_FILENO);
  ::dup2(devnull, STDERR_FILENO);
  char ok = kExitOk;
  (void)!::write(fds[1], &ok, 1);
  ::close(fds[1]);
  Status s = Serve(*mount);
  spdlog::default_logger()->flush();
  ::_exit(s.ok() ? kExitOk : kExitFailure);
}

}  // namespace

std::string DefaultMountLogFile() {
  return "/tmp/lakecache-mount-" + std::to_string(::getuid()) + ".log";
}

int RunMount(const GlobalFlags& flags, const MountRequest& req) {
  auto options = ParseMountOptions(flags.overrides);
  if (!options.ok()) return ReportError(options.status());
  if (req.uri.empty() && flags.config_file.empty() && req.master.empty()) {
    return ReportError(
        Status::InvalidArgument("mount needs a URI, --config FILE, or --master HOST:PORT (or " +
                                std::string(kMasterEnv) + ")"));
  }
  // A held connection is mounted already: by the process that holds it.
  if (req.fuse_fd < 0) {
    if (int rc = CheckMountpoint(req.mountpoint); rc != kExitOk) return rc;
  }
  GlobalFlags config_flags = flags;
  config_flags.overrides = options->config_overrides;
  CliContext ctx(config_flags);
  return req.background ? RunBackground(ctx, req, *options) : RunForeground(ctx, req, *options);
}

int RunUmount(const std::string& mountpoint) {
  std::string type = MountTypeAt(NormalizedPath(mountpoint));
  if (type != kLakecacheFsType) {
    return MountpointError(mountpoint + " is not a lakecache mount (" +
                           (type.empty() ? "nothing is mounted there" : "a " + type + " mount") +
                           ")");
  }
  if (::geteuid() == 0) {
    if (::umount2(mountpoint.c_str(), 0) == 0) return kExitOk;
    std::fprintf(stderr, "lakecache: error: unmounting %s: %s\n", mountpoint.c_str(),
                 std::strerror(errno));
    return errno == EINVAL || errno == ENOENT ? kExitUsage : kExitFailure;
  }
  ::execlp("fusermount3", "fusermount3", "-u", mountpoint.c_str(), static_cast<char*>(nullptr));
  std::fprintf(stderr, "lakecache: error: cannot run fusermount3: %s\n", std::strerror(errno));
  return kExitFailure;
}

}  // namespace lakecache::cli
