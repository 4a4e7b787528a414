#include "mount/mount_assembly.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "cluster_client/cluster_store.h"
#include "cluster_client/node_tier.h"
#include "common/mount_table.h"
#include "fs/mount_journal.h"
#include "fuse/fuse_connection.h"
#include "mount/mount_metrics.h"
#include "native/native_server.h"
#include "security/x509.h"

namespace lakecache {
namespace {

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

// 16 random hex digits: a name for this server process in its reports to the master.
std::string RandomHexId() {
  std::random_device device;
  std::mt19937_64 random(device());
  char id[17];
  std::snprintf(id, sizeof(id), "%016llx", static_cast<unsigned long long>(random()));
  return id;
}

// Memfd arenas for a mount's memory tier, so that the native data path hands its blocks to readers
// by reference; null (the tier stays private) without the native data path or shared memory. They
// also hold the blocks being fetched (up to the memory budget), which the tier then keeps where
// they lie.
std::shared_ptr<ShmArena> MemoryArena(const Config& config) {
  if (!config.client.native || config.cache.memory_capacity == 0) return nullptr;
  ShmArenaOptions shm;
  shm.capacity_bytes = config.cache.memory_capacity + config.client.memory_budget;
  shm.huge_pages = HugePagesNamed(config.cache.huge_pages);
  shm.name = "lakecache-mount-memory";
  Result<std::shared_ptr<ShmArena>> made = ShmArena::Create(shm);
  if (made.ok()) return std::move(*made);
  spdlog::warn(
      "the memory cache stays private (no shared memory: {}); the native data path "
      "copies its blocks",
      made.status().message());
  return nullptr;
}

Result<std::shared_ptr<BlockStore>> OpenBlocks(const MountSources& sources) {
  const Config& config = sources.config;
  auto budget = std::make_shared<MemoryBudget>(config.client.memory_budget);
  if (sources.cluster) {
    return ClusterBlockStore(sources.client, config.cache, config.client.short_circuit, budget,
                             MemoryArena(config));
  }
  LC_ASSIGN_OR_RETURN(std::unique_ptr<BlockStore> opened,
                      BlockStore::Open(config.cache, budget, MemoryArena(config)));
  return std::shared_ptr<BlockStore>(std::move(opened));
}

// The FileSystem's options: the spec's, with the client config's and the cluster's settings.
FileSystemOptions FileSystemOptionsFor(const MountSources& sources, const MountSpec& spec) {
  const ClientConfig& client = sources.config.client;
  FileSystemOptions fs_options = spec.fs;
  if (sources.cluster) {
    fs_options.max_run_blocks = 1;
    fs_options.range_reads_when_random = true;
    // The workers prefetch hinted files into their caches: this mount's memory is small.
    fs_options.remote_prefetch = [client = sources.client](const HintedFile& f, uint64_t first,
                                                           uint64_t limit) {
      return client->Prefetch(f.ns->name, f.object_key, f.etag, f.size, f.block_size, first, limit);
    };
  }
  fs_options.single_namespace_root = spec.single_namespace_root;
  fs_options.read_ahead_max = client.read_ahead_max;
  fs_options.prefetch_threads = client.prefetch_threads;
  fs_options.order_hint.window = client.order_hint_window;
  fs_options.write_budget = client.write_budget;
  fs_options.upload = UploadOptionsFor(client.write_per_file, client.upload_parts_in_flight);
  if (spec.upload_parts_per_step > 0) fs_options.upload.parts_per_step = spec.upload_parts_per_step;
  if (spec.single_put_max > 0) fs_options.upload.single_put_max = spec.single_put_max;
  if (!sources.config.cache.disks.empty()) {
    fs_options.stage_dir = sources.config.cache.disks[0].path;
    fs_options.stage_capacity = sources.config.cache.disks[0].capacity;
  }
  std::string socket = ControlSocketPath(NormalizedPath(spec.mountpoint));
  fs_options.upload_registry = socket.substr(0, socket.rfind('.')) + ".uploads";
  if (client.native) fs_options.native_socket = socket.substr(0, socket.rfind('.')) + ".native";
  return fs_options;
}

// The journal the servers of the mount share: the holder's, or the inherited --state-fd.
Status OpenJournal(const MountSpec& spec, FileSystemOptions* fs_options) {
  HolderLink* link = spec.link;
  int journal_fd = link != nullptr ? link->TakeJournalFd() : spec.state_fd;
  if (journal_fd < 0) return Status::Ok();
  Result<std::unique_ptr<MountJournal>> journal = MountJournal::Open(journal_fd);
  if (!journal.ok()) return journal.status().WithContext("the mount's journal");
  fs_options->journal = std::move(*journal);
  if (link != nullptr) {
    // Compacted logs go beside the disk cache, if there is one (see SetCompaction).
    fs_options->journal->SetCompaction([link](int fd) { return link->SendJournal(fd); },
                                       MountJournal::kMinCompactionBytes, fs_options->stage_dir);
  }
  return Status::Ok();
}

// Serves the connection the holder handed over (`link`), or the one inherited as --fuse-fd: the
// first server captures the kernel's INIT for those after it, which replay it.
Status AdoptConnection(FuseMount& mount, const MountSpec& spec) {
  if (HolderLink* link = spec.link; link != nullptr) {
    if (link->init().empty()) {
      return mount.Adopt(link->TakeFuseFds(), spec.mountpoint, nullptr,
                         [link](const FuseInit& init) {
                           link->SendInit(EncodeFuseInit(init));
                           link->SendServing();
                         });
    }
    LC_ASSIGN_OR_RETURN(FuseInit init, DecodeFuseInit(link->init()));
    LC_RETURN_IF_ERROR(mount.Adopt(link->TakeFuseFds(), spec.mountpoint, &init));
    link->SendServing();
    return Status::Ok();
  }
  if (spec.fuse_init.empty()) return Status::InvalidArgument("--fuse-fd needs --fuse-init FILE");
  std::error_code ec;
  if (!std::filesystem::exists(spec.fuse_init, ec)) {
    std::string path = spec.fuse_init;
    return mount.Adopt(spec.fuse_fd, spec.mountpoint, nullptr, [path](const FuseInit& init) {
      Status s = security::WriteFileAtomically(path, EncodeFuseInit(init), 0600);
      if (!s.ok()) spdlog::error("cannot save the FUSE INIT: {}", s.message());
    });
  }
  std::ifstream in(spec.fuse_init, std::ios::binary);
  std::string blob((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LC_ASSIGN_OR_RETURN(FuseInit init, DecodeFuseInit(blob));
  return mount.Adopt(spec.fuse_fd, spec.mountpoint, &init);
}

MountAdminOptions AdminOptionsFor(const MountSources& sources, const MountSpec& spec,
                                  const FileSystem& fs) {
  MountAdminOptions admin_options;
  admin_options.mountpoint = NormalizedPath(spec.mountpoint);
  admin_options.socket_path = ControlSocketPath(admin_options.mountpoint);
  admin_options.master = spec.master;
  if (!spec.credentials.empty()) {
    std::error_code ec;
    std::filesystem::path dir = std::filesystem::absolute(spec.credentials, ec);
    admin_options.credentials = ec ? spec.credentials : dir.lexically_normal().string();
  }
  // --allow-uid adds to client.allow_uids.
  const std::vector<uint32_t>& allowed = sources.config.client.allow_uids;
  admin_options.allow_uids.assign(allowed.begin(), allowed.end());
  admin_options.allow_uids.insert(admin_options.allow_uids.end(), spec.allow_uids.begin(),
                                  spec.allow_uids.end());
  if (spec.single_namespace_root) admin_options.root_namespace = fs.namespaces().names()[0];
  std::string where = "the mount at " + admin_options.mountpoint;
  if (sources.client != nullptr) {
    admin_options.health = [client = sources.client, where] {
      rpc::HealthState state = client->Health();
      state.detail = where + ": " + state.detail;
      return state;
    };
  } else {
    admin_options.health = [where] { return rpc::HealthState{true, where + " serves"}; };
  }
  return admin_options;
}

// The master's status page shows what this mount's readers read, and from where.
void ReportToMaster(ClusterClient& client, const std::shared_ptr<FileSystem>& fs,
                    const std::string& mountpoint) {
  std::string id = RandomHexId();
  int64_t start_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  client.SetReporter(
      [weak = std::weak_ptr<FileSystem>(fs), id, start_ms, mountpoint](rpc::ClientReport* report) {
        if (std::shared_ptr<FileSystem> alive = weak.lock()) {
          FillClientReport(*alive, id, mountpoint, start_ms, report);
        }
      });
}

// The control socket and the metrics collector of a mount that serves `fs`.
void StartAdmin(const MountSources& sources, const MountSpec& spec,
                const std::shared_ptr<FileSystem>& fs, AssembledMount& mounted) {
  MountAdminOptions admin_options = AdminOptionsFor(sources, spec, *fs);
  auto admin = MountAdmin::Start(fs, admin_options);
  if (admin.ok()) {
    mounted.admin = std::move(*admin);
  } else {
    // The mount still serves reads; only `lakecache load/report/free/stat PATH` cannot reach it.
    spdlog::warn("no control socket for {}: {}", admin_options.mountpoint,
                 admin.status().message());
  }
  if (!fs->native_socket().empty()) {
    NativeServerOptions native;
    native.socket_path = fs->native_socket();
    native.mountpoint = admin_options.mountpoint;
    native.allow_uids = admin_options.allow_uids;
    auto started = NativeServer::Start(fs, native);
    if (started.ok()) {
      mounted.native = std::move(*started);
    } else {
      spdlog::warn("no native data path for {}: {}", admin_options.mountpoint,
                   started.status().message());
    }
  }
  if (mounted.metrics == nullptr) return;
  const LoadJobTable* loads = mounted.admin != nullptr ? &mounted.admin->load_jobs() : nullptr;
  mounted.collector = mounted.metrics->AddCollector(
      [fs, client = sources.client, mountpoint = admin_options.mountpoint, loads,
       native = mounted.native.get()](metrics::Sink& sink) {
        AddMountMetrics(*fs, mountpoint, client.get(), loads, native, sink);
      });
}

}  // namespace

Result<AssembledMount> AssembleMount(MountSources sources, const MountSpec& spec,
                                     std::unique_ptr<metrics::Registry> registry) {
  LC_ASSIGN_OR_RETURN(std::shared_ptr<BlockStore> blocks, OpenBlocks(sources));
  FileSystemOptions fs_options = FileSystemOptionsFor(sources, spec);
  LC_RETURN_IF_ERROR(OpenJournal(spec, &fs_options));
  auto fs = std::make_shared<FileSystem>(std::move(sources.namespaces), blocks, fs_options);
  FuseMountOptions fuse_options = spec.fuse;
  fuse_options.kernel_read_ahead = sources.config.client.kernel_read_ahead;
  fuse_options.kernel_inodes = sources.config.client.kernel_inodes;
  fuse_options.read_only = spec.fs.read_only || (!fs->writable() && fs->order_hints() == nullptr);
  fuse_options.metrics = registry.get();
  auto mount = std::make_unique<FuseMount>(fs, fuse_options);
  if (spec.link != nullptr || spec.fuse_fd >= 0) {
    LC_RETURN_IF_ERROR(AdoptConnection(*mount, spec));
  } else {
    LC_RETURN_IF_ERROR(mount->Mount(spec.mountpoint));
  }
  if (sources.client != nullptr)
    ReportToMaster(*sources.client, fs, NormalizedPath(spec.mountpoint));
  AssembledMount mounted;
  mounted.metrics = std::move(registry);
  mounted.mount = std::move(mount);
  mounted.blocks = std::move(blocks);
  StartAdmin(sources, spec, fs, mounted);
  return mounted;
}

Status ServeMount(AssembledMount& mounted, const std::function<void()>& after_run) {
  Status s = mounted.mount->Run();
  if (after_run) after_run();
  mounted.collector.Reset();
  mounted.native.reset();
  mounted.admin.reset();
  LogCacheStats(*mounted.blocks);
  return s;
}

bool MountWrites(const MountSources& sources, bool read_only) {
  if (read_only) return false;
  if (sources.config.client.order_hint_window > 0) return true;
  // A cluster mount writes through the workers what the master's namespaces allow.
  if (sources.cluster) {
    const auto& namespaces = sources.client->namespaces();
    return std::any_of(namespaces.begin(), namespaces.end(),
                       [](const ClusterNamespace& ns) { return !ns.read_only; });
  }
  for (const auto& [name, ns] : sources.config.namespaces) {
    if (ns.write) return true;
  }
  return false;
}

RetryPolicy MountRetryPolicy() {
  RetryPolicy policy;
  policy.max_attempts = 10;
  policy.max_backoff = std::chrono::seconds(2);
  return policy;
}

Result<std::unique_ptr<NamespaceTable>> ClusterNamespaceTable(
    const std::shared_ptr<ClusterClient>& client, const std::string& master) {
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
    return Status::InvalidArgument("the master at " + master + " serves no namespaces");
  }
  return NamespaceTable::FromStores(std::move(sources));
}

Result<std::unique_ptr<HeldConnection>> MountHeldConnection(const std::string& mountpoint,
                                                            const std::string& options,
                                                            int descriptors) {
  LC_ASSIGN_OR_RETURN(std::unique_ptr<FuseConnection> conn,
                      FuseConnection::Mount(mountpoint, options, descriptors));
  return std::unique_ptr<HeldConnection>(std::move(conn));
}

}  // namespace lakecache
