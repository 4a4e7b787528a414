#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "cache/block_store.h"
#include "cache/memory_tier.h"
#include "cli/cache_flags.h"
#include "cli/cluster_launcher.h"
#include "cli/commands.h"
#include "cli/credentials_flag.h"
#include "cli/metrics_listen.h"
#include "cli/mount_options.h"
#include "cli/mount_table.h"
#include "cli/unmount.h"
#include "cluster_client/cluster_client.h"
#include "cluster_client/cluster_store.h"
#include "cluster_client/node_tier.h"
#include "common/logging.h"
#include "common/rendezvous.h"
#include "fs/mount_journal.h"
#include "fuse/fuse_connection.h"
#include "fuse/fuse_mount.h"
#include "meta/namespace_table.h"
#include "mount/mount_admin.h"
#include "mount/mount_holder.h"
#include "mount/mount_metrics.h"
#include "security/x509.h"
#include "ufs/retrying_store.h"

namespace lakecache::cli {
namespace {

// The memory cache of a cluster-mode mount when --mem-cache is not given: the blocks being read
// and those just read; the workers cache the rest.
constexpr uint64_t kClusterMountMemCache = 256ull << 20;
// The most of a mountpoint's name a default log file's name carries (its end).
constexpr size_t kLogNameMax = 48;

int MountpointError(const std::string& message) {
  std::fprintf(stderr, "lakecache: error: %s\n", message.c_str());
  return kExitUsage;
}

// A lakecache mount at `path` already: a live one, or the stale one a killed mount leaves (every
// access fails with ENOTCONN until it is unmounted).
int CheckNotMounted(const std::string& path) {
  if (MountTypeAt(NormalizedPath(path)) != kLakecacheFsType) return kExitOk;
  std::string fix = "unmount it with `lakecache umount " + path + "`, then mount again";
  // A statfs always asks the server (a stat may answer from the kernel's cache).
  struct statvfs sv;
  if (::statvfs(path.c_str(), &sv) != 0 && errno == ENOTCONN) {
    // Its server and holder are gone: nothing can bring it back, so it is cleared.
    // Lazily: a process still in it keeps its errors.
    if (UnmountFuse(path, Detach::kAlways).ok() &&
        MountTypeAt(NormalizedPath(path)) != kLakecacheFsType) {
      std::fprintf(stderr,
                   "lakecache: cleared the dead lakecache mount at %s (its server and holder "
                   "were gone)\n",
                   path.c_str());
      return kExitOk;
    }
    return MountpointError(path +
                           " is a stale lakecache mount: the process that served it is gone (" +
                           std::strerror(ENOTCONN) + ") and it could not be cleared; " + fix);
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
  std::unique_ptr<metrics::Registry> metrics;  // null without --metrics-listen; destroyed last
  std::unique_ptr<FuseMount> mount;
  std::shared_ptr<BlockStore> blocks;
  std::unique_ptr<MountAdmin> admin;  // the control socket
  metrics::Registry::Registration collector;
  std::unique_ptr<HttpEndpoint> metrics_endpoint;  // destroyed first
};

// 16 random hex digits: a name for this server process in its reports to the master.
std::string RandomHexId() {
  std::random_device device;
  std::mt19937_64 random(device());
  char id[17];
  std::snprintf(id, sizeof(id), "%016llx", static_cast<unsigned long long>(random()));
  return id;
}

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
Result<std::unique_ptr<NamespaceTable>> ClusterNamespaces(const MountRequest& req, Duration timeout,
                                                          Config* config,
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
                      OpenCredentials(req.credentials, security::Role::kClient, "lakecache mount"));
  client_options.connect_timeout = timeout;
  auto notice = NoticeWaitFor("the master at " + req.master, timeout);
  LC_ASSIGN_OR_RETURN(std::shared_ptr<ClusterClient> client,
                      ClusterClient::Connect(req.master, client_options));
  notice.reset();
  *out = client;
  std::vector<NamespaceTable::Source> sources;
  for (const ClusterNamespace& ns : client->namespaces()) {
    NamespaceTable::Source source;
    source.config.name = ns.name;
    source.config.uri = ns.uri;
    source.config.block_size = ns.block_size;
    source.config.metadata_ttl = ns.metadata_ttl;
    source.config.immutable = ns.immutable;
    source.config.write = !ns.read_only;
    source.config.allow_overwrite = ns.allow_overwrite;
    source.config.allow_delete = ns.allow_delete;
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

// The stores of `config` opened, each namespace's root listed within `timeout` (a line on a
// terminal says which endpoint is still awaited); a store that does not answer in time fails the
// mount before anything is mounted.
Result<std::unique_ptr<NamespaceTable>> ProbeNamespaces(const Config& config,
                                                        const StoreOptions& store_options,
                                                        Duration timeout) {
  std::string endpoints;
  for (const auto& [name, ns] : config.namespaces) {
    std::string endpoint = StoreEndpoint(ns);
    if (endpoint.empty() || endpoints.find(endpoint) != std::string::npos) continue;
    endpoints += (endpoints.empty() ? "" : ", ") + endpoint;
  }
  auto notice = NoticeWaitFor(endpoints, timeout);
  auto table = NamespaceTable::Open(config, store_options, /*probe=*/true, timeout);
  notice.reset();
  if (!table.ok()) {
    return ExplainTimeout(table.status(), endpoints, "listing the namespaces to mount", timeout);
  }
  return table;
}

// What a mount is built from before it touches its FUSE connection: the config, and the
// namespaces with their stores probed (or the cluster's, from its master). A mistake here is
// reported before anything is mounted.
struct Prepared {
  bool cluster = false;
  Config config;
  std::unique_ptr<NamespaceTable> namespaces;
  std::shared_ptr<ClusterClient> client;
};

Result<Prepared> Prepare(const CliContext& ctx, const MountRequest& req,
                         metrics::Registry* registry) {
  Prepared p;
  p.cluster = !req.master.empty();
  if (p.cluster) {
    // No namespaces of its own: a --config (or just -o client.KEY=VALUE) sets how it reads.
    if (!ctx.flags().config_file.empty()) {
      LC_ASSIGN_OR_RETURN(p.config, ctx.LoadConfig());
    } else {
      LC_ASSIGN_OR_RETURN(p.config, LoadConfigText("", "the mount command line",
                                                   ConfigFormat::kYaml, ctx.flags().overrides));
    }
    LC_ASSIGN_OR_RETURN(p.namespaces,
                        ClusterNamespaces(req, ctx.flags().timeout, &p.config, &p.client));
  } else {
    LC_ASSIGN_OR_RETURN(p.config, MountConfig(ctx, req.uri));
  }
  LC_RETURN_IF_ERROR(ApplyCacheFlags(req.cache_flags, &p.config.cache));
  WarnCacheBeyondDisk(p.config.cache);
  LC_RETURN_IF_ERROR(ApplyClientFlags(req, &p.config.client));
  if (!p.cluster) {
    StoreOptions store_options = ctx.MakeStoreOptions();
    store_options.retry = MountRetryPolicy();
    store_options.metrics = registry;
    LC_ASSIGN_OR_RETURN(p.namespaces,
                        ProbeNamespaces(p.config, store_options, ctx.flags().timeout));
    WarnEmptyNamespaces(*p.namespaces);
  }
  return p;
}

// The FUSE settings a mount of `req` runs with; a holder pins them.
FuseMountOptions FuseOptionsFor(const MountRequest& req, const MountOptions& options) {
  FuseMountOptions fuse = options.fuse;
  fuse.fs_name = !req.master.empty() ? "lakecache:cluster:" + req.master
                 : req.uri.empty()   ? "lakecache"
                                     : "lakecache:" + req.uri;
  return fuse;
}

// True when the mount `p` prepares is mounted "rw": not `-o ro`, and it has the control folder,
// whose file any reader writes (the FileSystem refuses every other change where nothing writes,
// with EROFS), or a namespace that writes (the FileSystem decides the same from the same inputs).
bool MountWrites(const Prepared& p, const MountOptions& options) {
  if (options.fs.read_only) return false;
  if (p.config.client.order_hint_window > 0) return true;
  // A cluster mount writes through the workers what the master's namespaces allow.
  if (p.cluster) {
    return std::any_of(p.client->namespaces().begin(), p.client->namespaces().end(),
                       [](const ClusterNamespace& ns) { return !ns.read_only; });
  }
  for (const auto& [name, ns] : p.config.namespaces) {
    if (ns.write) return true;
  }
  return false;
}

// Serves the connection the holder handed over (`link`), or the one inherited as --fuse-fd: the
// first server captures the kernel's INIT for those after it, which replay it.
Status AdoptConnection(FuseMount& mount, const MountRequest& req, HolderLink* link) {
  if (link != nullptr) {
    if (link->init().empty()) {
      return mount.Adopt(link->TakeFuseFds(), req.mountpoint, nullptr,
                         [link](const FuseInit& init) {
                           link->SendInit(EncodeFuseInit(init));
                           link->SendServing();
                         });
    }
    LC_ASSIGN_OR_RETURN(FuseInit init, DecodeFuseInit(link->init()));
    LC_RETURN_IF_ERROR(mount.Adopt(link->TakeFuseFds(), req.mountpoint, &init));
    link->SendServing();
    return Status::Ok();
  }
  if (req.fuse_init.empty()) return Status::InvalidArgument("--fuse-fd needs --fuse-init FILE");
  std::error_code ec;
  if (!std::filesystem::exists(req.fuse_init, ec)) {
    std::string path = req.fuse_init;
    return mount.Adopt(req.fuse_fd, req.mountpoint, nullptr, [path](const FuseInit& init) {
      Status s = security::WriteFileAtomically(path, EncodeFuseInit(init), 0600);
      if (!s.ok()) spdlog::error("cannot save the FUSE INIT: {}", s.message());
    });
  }
  std::ifstream in(req.fuse_init, std::ios::binary);
  std::string blob((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LC_ASSIGN_OR_RETURN(FuseInit init, DecodeFuseInit(blob));
  return mount.Adopt(req.fuse_fd, req.mountpoint, &init);
}

// Builds the rest of the stack on `p` and serves the connection: the holder's (`link`), the
// inherited --fuse-fd, or a mount of its own.
Result<Mounted> Finish(Prepared p, const MountRequest& req, const MountOptions& options,
                       HolderLink* link, std::unique_ptr<metrics::Registry> registry) {
  Config& config = p.config;
  LC_ASSIGN_OR_RETURN(HttpEndpointOptions metrics_options,
                      MetricsEndpointOptions("lakecache mount", req.metrics_listen, req.credentials,
                                             req.insecure, true));
  auto budget = std::make_shared<MemoryBudget>(config.client.memory_budget);
  std::shared_ptr<BlockStore> blocks;
  if (p.cluster) {
    LC_ASSIGN_OR_RETURN(
        blocks, ClusterBlockStore(p.client, config.cache, config.client.short_circuit, budget));
  } else {
    LC_ASSIGN_OR_RETURN(std::unique_ptr<BlockStore> opened, BlockStore::Open(config.cache, budget));
    blocks = std::move(opened);
  }
  FileSystemOptions fs_options = options.fs;
  if (p.cluster) {
    fs_options.max_run_blocks = 1;
    fs_options.range_reads_when_random = true;
  }
  fs_options.single_namespace_root = !req.uri.empty();
  fs_options.read_ahead_max = config.client.read_ahead_max;
  fs_options.prefetch_threads = config.client.prefetch_threads;
  fs_options.order_hint.window = config.client.order_hint_window;
  if (p.cluster) {
    // The workers prefetch hinted files into their caches: this mount's memory is small.
    fs_options.remote_prefetch = [client = p.client](const HintedFile& f, uint64_t first,
                                                     uint64_t limit) {
      return client->Prefetch(f.ns->name, f.object_key, f.etag, f.size, f.block_size, first, limit);
    };
  }
  fs_options.write_budget = config.client.write_budget;
  fs_options.upload =
      UploadOptionsFor(config.client.write_per_file, config.client.upload_parts_in_flight);
  // For tests of part growth without writing thousands of parts: parts per size step.
  if (const char* step = std::getenv("LAKECACHE_UPLOAD_PARTS_PER_STEP"); step != nullptr) {
    fs_options.upload.parts_per_step = std::max(1, std::atoi(step));
  }
  // An experiment (bench/write): files up to this many MiB, staged on disk, sent as one Put at
  // close instead of streamed in parts (docs/benchmarks.md, "Writes").
  if (const char* mib = std::getenv("LAKECACHE_SINGLE_PUT_MAX_MIB"); mib != nullptr) {
    fs_options.upload.single_put_max = std::strtoull(mib, nullptr, 10) << 20;
  }
  if (!config.cache.disks.empty()) {
    fs_options.stage_dir = config.cache.disks[0].path;
    fs_options.stage_capacity = config.cache.disks[0].capacity;
  }
  {
    std::string socket = ControlSocketPath(NormalizedPath(req.mountpoint));
    fs_options.upload_registry = socket.substr(0, socket.rfind('.')) + ".uploads";
  }
  int journal_fd = link != nullptr ? link->TakeJournalFd() : req.state_fd;
  if (journal_fd >= 0) {
    Result<std::unique_ptr<MountJournal>> journal = MountJournal::Open(journal_fd);
    if (!journal.ok()) return journal.status().WithContext("the mount's journal");
    fs_options.journal = std::move(*journal);
    if (link != nullptr) {
      fs_options.journal->SetCompaction([link](int fd) { return link->SendJournal(fd); });
    }
  }
  auto fs = std::make_shared<FileSystem>(std::move(p.namespaces), blocks, fs_options);
  FuseMountOptions fuse_options = FuseOptionsFor(req, options);
  fuse_options.kernel_read_ahead = config.client.kernel_read_ahead;
  fuse_options.read_only =
      options.fs.read_only || (!fs->writable() && fs->order_hints() == nullptr);
  fuse_options.metrics = registry.get();
  auto mount = std::make_unique<FuseMount>(fs, fuse_options);
  if (link != nullptr || req.fuse_fd >= 0) {
    LC_RETURN_IF_ERROR(AdoptConnection(*mount, req, link));
  } else {
    LC_RETURN_IF_ERROR(mount->Mount(req.mountpoint));
  }
  MountAdminOptions admin_options;
  admin_options.mountpoint = NormalizedPath(req.mountpoint);
  admin_options.socket_path = ControlSocketPath(admin_options.mountpoint);
  admin_options.master = req.master;
  if (!req.credentials.empty()) {
    std::error_code ec;
    std::filesystem::path dir = std::filesystem::absolute(req.credentials, ec);
    admin_options.credentials = ec ? req.credentials : dir.lexically_normal().string();
  }
  // --allow-uid adds to client.allow_uids.
  admin_options.allow_uids.assign(config.client.allow_uids.begin(), config.client.allow_uids.end());
  admin_options.allow_uids.insert(admin_options.allow_uids.end(), req.allow_uids.begin(),
                                  req.allow_uids.end());
  if (fs_options.single_namespace_root) admin_options.root_namespace = fs->namespaces().names()[0];
  std::string where = "the mount at " + admin_options.mountpoint;
  if (p.client != nullptr) {
    admin_options.health = [client = p.client, where] {
      rpc::HealthState state = client->Health();
      state.detail = where + ": " + state.detail;
      return state;
    };
  } else {
    admin_options.health = [where] { return rpc::HealthState{true, where + " serves"}; };
  }
  if (p.client != nullptr) {
    // The master's status page shows what this mount's readers read, and from where.
    std::string id = RandomHexId();
    int64_t start_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
    p.client->SetReporter([weak = std::weak_ptr<FileSystem>(fs), id, start_ms,
                           mountpoint = NormalizedPath(req.mountpoint)](rpc::ClientReport* report) {
      if (std::shared_ptr<FileSystem> alive = weak.lock()) {
        FillClientReport(*alive, id, mountpoint, start_ms, report);
      }
    });
  }
  Mounted mounted;
  mounted.metrics = std::move(registry);
  mounted.mount = std::move(mount);
  mounted.blocks = std::move(blocks);
  auto admin = MountAdmin::Start(fs, admin_options);
  if (admin.ok()) {
    mounted.admin = std::move(*admin);
  } else {
    // The mount still serves reads; only `lakecache load/report/free/stat PATH` cannot reach it.
    spdlog::warn("no control socket for {}: {}", admin_options.mountpoint,
                 admin.status().message());
  }
  if (mounted.metrics != nullptr) {
    const LoadJobTable* loads = mounted.admin != nullptr ? &mounted.admin->load_jobs() : nullptr;
    mounted.collector = mounted.metrics->AddCollector(
        [fs, client = p.client, mountpoint = admin_options.mountpoint, loads](metrics::Sink& sink) {
          AddMountMetrics(*fs, mountpoint, client.get(), loads, sink);
        });
    // A server that takes over from another waits for its predecessor to let the port go.
    LC_ASSIGN_OR_RETURN(
        mounted.metrics_endpoint,
        ServeMetrics(metrics_options, mounted.metrics.get(), {}, std::chrono::seconds(10)));
  }
  return mounted;
}

// Serves until unmounted (or stopped for a successor); then the control socket goes (none is
// left behind) and the cache's figures go to the log.
Status Serve(Mounted& mounted) {
  Status s = mounted.mount->Run();
  mounted.metrics_endpoint.reset();
  mounted.collector.Reset();
  mounted.admin.reset();
  LogCacheStats(*mounted.blocks);
  return s;
}

void DetachStdio() {
  int devnull = ::open("/dev/null", O_RDWR);
  ::dup2(devnull, STDIN_FILENO);
  ::dup2(devnull, STDOUT_FILENO);
  ::dup2(devnull, STDERR_FILENO);
  if (devnull > STDERR_FILENO) ::close(devnull);
}

// A server of a held mount (--holder SOCKET): prepares, asks the holder for the connection (the
// previous server, if any, stops first), finishes the stack and serves until unmounted or told
// that a successor waits.
int RunHeldServer(const CliContext& ctx, const MountRequest& req, const MountOptions& options) {
  std::unique_ptr<metrics::Registry> registry = MakeMetricsRegistry(req.metrics_listen);
  auto prepared = Prepare(ctx, req, registry.get());
  if (!prepared.ok()) return ReportError(prepared.status());
  std::string mountpoint = NormalizedPath(req.mountpoint);
  MountRequest held = req;
  held.mountpoint = mountpoint;
  FuseMountOptions fuse = FuseOptionsFor(req, options);
  fuse.read_only = !MountWrites(*prepared, options);
  // Four descriptors, the FUSE threads shared out among them (LAKECACHE_FUSE_DESCRIPTORS sets
  // another number, for measuring): parallel reads need several; a metadata walk is served best
  // by few threads (the kernel hands each request to the thread that has waited longest).
  int descriptors = 4;
  if (const char* n = std::getenv("LAKECACHE_FUSE_DESCRIPTORS"); n != nullptr && std::atoi(n) > 0) {
    descriptors = std::atoi(n);
  }
  auto link = HolderLink::Connect(req.holder, mountpoint, FuseMountOptionString(fuse), descriptors,
                                  std::chrono::seconds(30));
  if (!link.ok()) return ReportError(link.status());
  auto mounted = Finish(std::move(*prepared), held, options, link->get(), std::move(registry));
  if (!mounted.ok()) return ReportError(mounted.status());
  FuseMount* mount = mounted->mount.get();
  (*link)->Watch([mount] { mount->Stop(); },
                 [mountpoint] {
                   spdlog::warn(
                       "the holder of {} is gone: the mount serves on, but it ends with "
                       "this process",
                       mountpoint);
                 });
  if (req.background) DetachStdio();  // the holder told the caller; the log has the rest
  Status s = Serve(*mounted);
  (*link)->Unwatch();  // before the mount its callback stops goes
  spdlog::default_logger()->flush();
  return s.ok() ? kExitOk : ReportError(s);
}

// The command line of the servers a supervising holder starts: this one's, serving through the
// holder at `socket`, logging where the holder does.
Result<std::vector<std::string>> ServerArgv(const CliContext& ctx, const MountRequest& req,
                                            const std::string& socket) {
  LC_ASSIGN_OR_RETURN(std::string exe, SelfExecutable());
  std::vector<std::string> argv = {exe};
  if (req.background && ctx.flags().log_file.empty()) {
    argv.insert(argv.end(), {"--log-file", DefaultMountLogFile(req.mountpoint)});
  }
  argv.insert(argv.end(), req.argv.begin() + (req.argv.empty() ? 0 : 1), req.argv.end());
  argv.insert(argv.end(), {"--holder", socket});
  return argv;
}

Result<std::unique_ptr<HeldConnection>> MountHeld(const std::string& mountpoint,
                                                  const std::string& options, int descriptors) {
  LC_ASSIGN_OR_RETURN(std::unique_ptr<FuseConnection> conn,
                      FuseConnection::Mount(mountpoint, options, descriptors));
  return std::unique_ptr<HeldConnection>(std::move(conn));
}

// `lakecache mount`: this process holds the mount (mount/mount_holder.h) and supervises its
// server; `on_serving` runs once the first server serves.
int RunSupervised(const CliContext& ctx, const MountRequest& req,
                  std::function<void()> on_serving) {
  MountHolderOptions holder;
  holder.socket_path = HolderSocketPath(NormalizedPath(req.mountpoint));
  holder.mount = MountHeld;
  auto argv = ServerArgv(ctx, req, holder.socket_path);
  if (!argv.ok()) return ReportError(argv.status());
  holder.server_argv = std::move(*argv);
  holder.on_serving = std::move(on_serving);
  int server_exit = -1;
  Status s = RunMountHolder(holder, &server_exit);
  if (server_exit > 0) return server_exit;  // it said why
  return s.ok() ? kExitOk : ReportError(s);
}

int RunForeground(const CliContext& ctx, const MountRequest& req) {
  return RunSupervised(ctx, req, [&req] {
    std::fprintf(stderr, "lakecache: mounted at %s\n", req.mountpoint.c_str());
  });
}

// What a mount shows, as `mount --background` says it: the URI, the cluster or the config.
std::string MountSource(const CliContext& ctx, const MountRequest& req) {
  if (!req.master.empty()) return "cluster " + req.master;
  if (!req.uri.empty()) return req.uri;
  return "the namespaces of " + ctx.flags().config_file;
}

// Forks a daemon that holds the mount; returns once its server serves (or failed), saying so on
// stdout.
int RunBackground(const CliContext& ctx, const MountRequest& req) {
  std::string log_file =
      ctx.flags().log_file.empty() ? DefaultMountLogFile(req.mountpoint) : ctx.flags().log_file;
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
    if (code == kExitOk) {
      std::printf("mounted %s at %s (log: %s)\n", MountSource(ctx, req).c_str(),
                  NormalizedPath(req.mountpoint).c_str(), log_file.c_str());
    }
    return code;
  }
  ::close(fds[0]);
  ::fcntl(fds[1], F_SETFD, FD_CLOEXEC);
  ::setsid();
  if (Status s = InitLogging(ctx.flags().log_level, log_file); !s.ok()) {
    std::fprintf(stderr, "lakecache: error: %s\n", s.message().c_str());
    ::_exit(kExitFailure);
  }
  int ready_fd = fds[1];
  int rc = RunSupervised(ctx, req, [ready_fd] {
    char ok = kExitOk;
    (void)!::write(ready_fd, &ok, 1);
    ::close(ready_fd);
    DetachStdio();
  });
  spdlog::default_logger()->flush();
  ::_exit(rc);
}

// `lakecache mount --takeover MNT`: this binary's server takes the live mount over.
int RunTakeover(const MountRequest& req) {
  std::string mountpoint = NormalizedPath(req.mountpoint);
  if (MountTypeAt(mountpoint) != kLakecacheFsType) {
    return MountpointError(mountpoint + " is not a lakecache mount: nothing to take over");
  }
  std::string socket = req.holder.empty() ? HolderSocketPath(mountpoint) : req.holder;
  auto exe = SelfExecutable();
  if (!exe.ok()) return ReportError(exe.status());
  auto taken = RequestTakeover(socket, *exe, std::chrono::seconds(60));
  if (!taken.ok()) return ReportError(taken.status().WithContext("taking over " + mountpoint));
  std::fprintf(stderr,
               "lakecache: %s is served by pid %d (%s) now; the handover paused it %.3f s\n",
               mountpoint.c_str(), static_cast<int>(taken->pid), exe->c_str(), taken->pause_s);
  return kExitOk;
}

}  // namespace

std::string DefaultMountLogFile(const std::string& mountpoint) {
  // Named after the mountpoint for whoever reads /tmp, and told apart by a hash of it (its
  // characters beyond letters and digits all read as '-').
  std::string path = NormalizedPath(mountpoint);
  std::string name;
  for (char c : path) {
    bool plain = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_';
    if (plain) {
      name.push_back(c);
    } else if (!name.empty() && name.back() != '-') {
      name.push_back('-');
    }
  }
  if (name.size() > kLogNameMax) name.erase(0, name.size() - kLogNameMax);
  if (!name.empty() && name.back() == '-') name.pop_back();  // runs of others are one '-'
  if (!name.empty() && name.front() == '-') name.erase(0, 1);
  char hash[9];
  std::snprintf(hash, sizeof(hash), "%08x", static_cast<unsigned>(RendezvousSeed(path)));
  return "/tmp/lakecache-mount-" + std::to_string(::getuid()) + "-" +
         (name.empty() ? "" : name + "-") + hash + ".log";
}

int RunMount(const GlobalFlags& flags, const MountRequest& req) {
  auto options = ParseMountOptions(flags.overrides);
  if (!options.ok()) return ReportError(options.status());
  if (req.takeover) return RunTakeover(req);
  if (req.uri.empty() && flags.config_file.empty() && req.master.empty()) {
    return ReportError(
        Status::InvalidArgument("mount needs a URI, --config FILE, or --master HOST:PORT (or " +
                                std::string(kMasterEnv) + ")"));
  }
  GlobalFlags config_flags = flags;
  config_flags.overrides = options->config_overrides;
  CliContext ctx(config_flags);
  // A held connection is mounted already: by the process that holds it.
  if (!req.holder.empty()) return RunHeldServer(ctx, req, *options);
  if (req.fuse_fd >= 0) {
    std::unique_ptr<metrics::Registry> registry = MakeMetricsRegistry(req.metrics_listen);
    auto prepared = Prepare(ctx, req, registry.get());
    if (!prepared.ok()) return ReportError(prepared.status());
    auto mounted = Finish(std::move(*prepared), req, *options, nullptr, std::move(registry));
    if (!mounted.ok()) return ReportError(mounted.status());
    Status s = Serve(*mounted);
    return s.ok() ? kExitOk : ReportError(s);
  }
  // A --metrics-listen that may not be served, or is in use, fails here, before anything is
  // mounted.
  auto metrics_options =
      MetricsEndpointOptions("lakecache mount", req.metrics_listen, req.credentials, req.insecure,
                             !flags.log_file.empty());
  if (!metrics_options.ok()) return ReportError(metrics_options.status());
  if (Status s = CheckMetricsListen(*metrics_options); !s.ok()) return ReportError(s);
  if (int rc = CheckMountpoint(req.mountpoint); rc != kExitOk) return rc;
  return req.background ? RunBackground(ctx, req) : RunForeground(ctx, req);
}

int RunHolder(const HolderRequest& req) {
  MountHolderOptions holder;
  holder.socket_path = req.socket;
  holder.mount = MountHeld;
  Status s = RunMountHolder(holder);
  return s.ok() ? kExitOk : ReportError(s);
}

}  // namespace lakecache::cli
