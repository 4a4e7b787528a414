#include "cli/mount_prepare.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "cli/cache_flags.h"
#include "cli/credentials_flag.h"
#include "cli/unmount.h"
#include "common/mount_table.h"
#include "common/wait_notice.h"
#include "meta/namespace_table.h"

namespace lakecache::cli {
namespace {

// The memory cache of a cluster-mode mount when --mem-cache is not given: the blocks being read
// and those just read; the workers cache the rest.
constexpr uint64_t kClusterMountMemCache = 256ull << 20;

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
  client_options.replicas = config->client.replicas;
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
  return ClusterNamespaceTable(client, req.master);
}

// Where a standalone mount keeps listings beyond `client.metadata_memory`: `client.metadata_dir`,
// else beside its first disk cache folder; with neither (or "off") every listing stays in memory,
// as it does when the index cannot be opened (a cache never keeps a mount from starting). A new
// mount starts it empty, so that a remount lists afresh as it always did; a server that takes a
// live mount over (`--takeover`) serves what the last one had, by the TTL rules.
MetadataIndexing MountIndexing(const Config& config, bool takeover) {
  MetadataIndexing indexing;
  indexing.memory = config.client.metadata_memory;
  std::string dir = config.client.metadata_dir;
  if (dir == "off" || (dir.empty() && config.cache.disks.empty())) return indexing;
  if (dir.empty()) dir = config.cache.disks.front().path + "/metadata";
  ListingIndexOptions options;
  options.empty = !takeover;
  auto index = ListingIndex::Open(dir, options);
  if (!index.ok()) {
    std::fprintf(stderr, "lakecache: warning: %s: every listing stays in memory\n",
                 index.status().message().c_str());
    return indexing;
  }
  indexing.index = std::move(*index);
  return indexing;
}

// The stores of `config` opened, each namespace's root listed within `timeout` (a line on a
// terminal says which endpoint is still awaited); a store that does not answer in time fails the
// mount before anything is mounted.
Result<std::unique_ptr<NamespaceTable>> ProbeNamespaces(const Config& config,
                                                        const StoreOptions& store_options,
                                                        Duration timeout, bool takeover) {
  std::string endpoints;
  for (const auto& [name, ns] : config.namespaces) {
    std::string endpoint = StoreEndpoint(ns);
    if (endpoint.empty() || endpoints.find(endpoint) != std::string::npos) continue;
    endpoints += (endpoints.empty() ? "" : ", ") + endpoint;
  }
  auto notice = NoticeWaitFor(endpoints, timeout);
  auto table = NamespaceTable::Open(config, store_options, /*probe=*/true, timeout,
                                    MountIndexing(config, takeover));
  notice.reset();
  if (!table.ok()) {
    return ExplainTimeout(table.status(), endpoints, "listing the namespaces to mount", timeout);
  }
  return table;
}

}  // namespace

int MountpointError(const std::string& message) {
  std::fprintf(stderr, "lakecache: error: %s\n", message.c_str());
  return kExitUsage;
}

namespace {

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

}  // namespace

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

Result<MountSources> PrepareMount(const CliContext& ctx, const MountRequest& req,
                                  metrics::Registry* registry) {
  MountSources p;
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
    LC_ASSIGN_OR_RETURN(
        p.namespaces, ProbeNamespaces(p.config, store_options, ctx.flags().timeout, req.takeover));
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

MountSpec SpecFor(const MountRequest& req, const MountOptions& options) {
  MountSpec spec;
  spec.mountpoint = req.mountpoint;
  spec.single_namespace_root = !req.uri.empty();
  spec.master = req.master;
  spec.credentials = req.credentials;
  spec.allow_uids = req.allow_uids;
  spec.fs = options.fs;
  spec.fuse = FuseOptionsFor(req, options);
  spec.single_put_max = options.single_put_max;
  spec.upload_parts_per_step = options.upload_parts_per_step;
  spec.fuse_fd = req.fuse_fd;
  spec.fuse_init = req.fuse_init;
  spec.state_fd = req.state_fd;
  return spec;
}

}  // namespace lakecache::cli
