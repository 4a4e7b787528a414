// Config: the validated configuration of a lakecache process, loaded from YAML or JindoFS-style
// properties, with command-line overrides.
//
// Loading is strict: an unknown key, a wrong type or a bad value is an InvalidArgument whose
// message names the file, the dotted key and what is wrong ("lake.yaml:
// namespaces.test.metadata_ttl: invalid duration 'x' (expected e.g. 30s, 5m, 250ms)"). Secrets are
// held as Secret and never printed. Later issues add sections (master, worker) as further structs
// of Config.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/object_uri.h"
#include "common/result.h"
#include "common/secret.h"
#include "common/units.h"

namespace lakecache {

struct NamespaceConfig {
  std::string name;
  std::string mode = "cache";  // the only mode for now
  std::string uri;             // as written, e.g. "s3://bucket/prefix"
  ObjectUri location;          // parsed `uri`
  // "http://127.0.0.1:9000"; empty: AWS's regional endpoint (or OSS's from uri)
  std::string endpoint;
  std::string region = "us-east-1";
  bool path_style = false;
  std::string access_key;  // key id: not secret, may appear in messages
  Secret secret_key;
  Secret session_token;
  std::string access_key_file;  // files whose (trimmed) content is the key id / secret
  std::string secret_key_file;
  Duration metadata_ttl = std::chrono::seconds(60);
  bool immutable = false;
  uint64_t block_size = 4ull << 20;  // cache block size; the last block of an object may be shorter
  // What a mount may do to the store: create new objects (`write`, default true; false: the
  // namespace is read-only), replace existing ones (`allow_overwrite`) and remove them
  // (`allow_delete`, also the source side of a rename).
  bool write = true;
  bool allow_overwrite = false;
  bool allow_delete = false;
};

// One cache directory of the disk tier (`cache.disks` entries).
struct DiskCacheConfig {
  std::string path;       // absolute
  uint64_t capacity = 0;  // bytes of blocks this directory may hold; > 0
  // The free-space floor: blocks are never written once the file system has less free space.
  // The config key `min_free` sets one of the two, a size ("20GiB") or a share of the file
  // system's size ("10%", default 5%); if code sets both, the larger floor applies.
  uint64_t min_free_bytes = 0;
  double min_free_ratio = 0.05;
};

// The block cache of this process (`cache` section). Defaults: 1GiB of memory, no disk tier.
struct CacheConfig {
  uint64_t memory_capacity = 1ull << 30;  // memory tier budget; > 0
  // The pages of the memory tier's shared memory (cache/shm_arena.h: HugePages): "auto"
  // (transparent huge pages advised; the kernel's shmem_enabled decides), "hugetlb" (the node's
  // reserved huge pages, vm.nr_hugepages) or "off".
  std::string huge_pages = "auto";
  std::vector<DiskCacheConfig> disks;  // empty: memory only
  std::string policy = "tinylfu";      // eviction policy of every tier: "tinylfu" or "lru"
  // A worker: the share of its memory tier the replicas it keeps for the mounts of its host may
  // hold, in percent (worker/replica_ledger.h); they go first when its own blocks need the room.
  // 0: it keeps none (it still gets blocks for them from its peers).
  uint32_t replica_percent = 50;
};

// How a mount reads (`client` section): adaptive read-ahead and the memory it may hold outside
// the cache tiers.
inline constexpr uint64_t kDefaultMemoryBudget = 512ull << 20;

struct ClientConfig {
  uint64_t read_ahead_max = 64ull << 20;          // largest read-ahead window per stream; 0: none
  uint64_t memory_budget = kDefaultMemoryBudget;  // in-flight and prefetched block bytes; > 0
  uint32_t prefetch_threads = 16;                 // parallel ranged GETs of read-ahead; > 0
  // Bytes the order hint (`<mountpoint>/.lakecache/prefetch`) fetches ahead of the readers; 0:
  // no control folder.
  uint64_t order_hint_window = 256ull << 20;
  // The kernel's read-ahead for the mount (its read_ahead_kb, set as root): the largest READ a
  // sequential reader's page cache asks for. 0: the kernel's default (128 KiB) is kept.
  uint64_t kernel_read_ahead = 1ull << 20;
  // Cluster mode: read blocks of a worker on this host where they lie (its shared memory, its
  // cache files).
  bool short_circuit = true;
  // Cluster mode: a block another host's worker owns is read through this host's worker, which
  // keeps it as a replica (cluster_client/client_options.h).
  bool replicas = true;
  // Map a shared block's pages on first use rather than fault them in page by page. Off by
  // default: replies are spliced from the worker's memfd, which never touches the mapping.
  bool shm_prefault = false;
  // The native data path beside FUSE: readers attach through `<mount>/.lakecache/native`
  // (native/native_server.h).
  bool native = true;
  // Cluster mode: how blocks come from a worker: "bulk" (its bulk data path, framed TCP; gRPC for
  // a worker that has none) or "grpc" (ReadBlock over gRPC).
  std::string transport = "bulk";
  // Uids besides the mount's own and root whose admin commands its control socket serves.
  std::vector<uint32_t> allow_uids;
  // Writes: the memory all files being written may hold at once (a writer waits when it is
  // used up), the most one file may hold, and the parts of one file uploaded at once. A part is
  // at most write_per_file / (upload_parts_in_flight + 1).
  uint64_t write_budget = 512ull << 20;    // >= write_per_file
  uint64_t write_per_file = 256ull << 20;  // >= (upload_parts_in_flight + 1) * 8MiB
  uint32_t upload_parts_in_flight = 4;     // 1..64
  // Listings and attributes kept in memory; beyond it they live in the on-disk index
  // (`metadata_dir`) and are read back on demand. > 0. Sized for the chart's FUSE pod.
  uint64_t metadata_memory = 256ull << 20;
  // The most inodes the kernel may hold of the mount (each about 1.1 KB of the kernel's memory and
  // 55 bytes of the mount's): beyond it the mount asks the kernel to forget the files it holds
  // (fuse/inode_trimmer.h). 0: as many as the kernel keeps (until memory pressure).
  uint32_t kernel_inodes = 4'000'000;
  // The on-disk index of listings (an absolute path): "" puts it beside the disk cache
  // (`<first cache disk>/metadata`), and a mount without a disk cache keeps every listing in
  // memory; "off": no index.
  std::string metadata_dir;
};

// Membership of a cluster (`cluster` section), the same for the master and every worker: a worker
// heartbeats every `heartbeat_interval`; the master drops one it has not heard from for
// `heartbeat_timeout`.
struct ClusterConfig {
  Duration heartbeat_interval = std::chrono::seconds(1);  // > 0
  Duration heartbeat_timeout = std::chrono::seconds(5);   // > heartbeat_interval
  // The most capacity the master believes of one worker (its weight in placement): a worker that
  // claims more is registered with this much, and warned about.
  uint64_t max_worker_capacity = 64ull << 40;
  // How long the certificate the master issues a worker is valid; the worker renews it halfway.
  Duration worker_certificate_validity = std::chrono::hours(24);  // >= 10 s
};

struct Config {
  std::string source;  // the file it came from, for messages; empty when built in code
  std::map<std::string, NamespaceConfig> namespaces;
  CacheConfig cache;
  ClientConfig client;
  ClusterConfig cluster;
};

enum class ConfigFormat { kAuto, kYaml, kProperties };

// Loads `path`. The format is properties when the name ends in ".properties" or the text has "jfs."
// keys, YAML otherwise. Each override is "dotted.key=value" in YAML key terms
// ("namespaces.test.metadata_ttl=5m") and is applied before validation.
Result<Config> LoadConfigFile(const std::string& path,
                              const std::vector<std::string>& overrides = {});

// Same from text; `source` names it in messages.
Result<Config> LoadConfigText(std::string_view text, std::string_view source, ConfigFormat format,
                              const std::vector<std::string>& overrides = {});

// Whether a namespace reaches `endpoint` ("http://127.0.0.1:9000") path-style when nothing says
// which: yes for an IP address or localhost, where a virtual-hosted name (bucket.127.0.0.1) cannot
// resolve (local test servers such as MinIO and s3rver); no for a DNS name, as real services
// prefer. The config's `endpoint` key and the CLI's --endpoint both follow it.
bool PathStyleByDefault(std::string_view endpoint);

// The effective config as YAML, with every secret shown as "<redacted>".
std::string RenderConfig(const Config& config);

}  // namespace lakecache
