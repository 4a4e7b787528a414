// The `cache:` and `client:` sections of the config.
#include <charconv>

#include "common/config_reader.h"
#include "common/config_tree.h"

namespace lakecache::config_internal {
namespace {

// The names MakeEvictionPolicy (src/cache) accepts, repeated here because common must not depend
// on cache.
constexpr std::string_view kPolicyNames[] = {"tinylfu", "lru"};

Status ReadPolicy(const ErrorContext& ctx, const std::string& key, const YAML::Node& node,
                  std::string* out) {
  LC_RETURN_IF_ERROR(ReadScalar(ctx, key, node, out));
  for (std::string_view name : kPolicyNames) {
    if (*out == name) return Status::Ok();
  }
  return ctx.Error(key, "unknown eviction policy '" + *out + "' (expected tinylfu or lru)");
}

Status ReadMemory(const ErrorContext& ctx, const YAML::Node& node, CacheConfig* cache) {
  if (node.IsNull()) return Status::Ok();
  if (!node.IsMap()) return ctx.Error("cache.memory", "expected a map such as {capacity: 2GiB}");
  return ForEachEntry(
      ctx, "cache.memory", node,
      [&](const std::string& field, const std::string& key, const YAML::Node& v) -> Status {
        if (field == "huge_pages") {
          LC_RETURN_IF_ERROR(ReadScalar(ctx, key, v, &cache->huge_pages));
          if (cache->huge_pages == "auto" || cache->huge_pages == "hugetlb" ||
              cache->huge_pages == "off") {
            return Status::Ok();
          }
          return ctx.Error(key, "unknown huge_pages '" + cache->huge_pages +
                                    "' (expected auto, hugetlb or off)");
        }
        if (field != "capacity") return ctx.Error(key, "unknown key");
        LC_RETURN_IF_ERROR(ReadSize(ctx, key, v, &cache->memory_capacity));
        if (cache->memory_capacity == 0) return ctx.Error(key, "must be more than 0");
        return Status::Ok();
      });
}

// "10%" or "0%" (a share of the file system), or a size ("20GiB"); exactly one of the two is set.
Status ReadMinFree(const ErrorContext& ctx, const std::string& key, const YAML::Node& node,
                   DiskCacheConfig* disk) {
  std::string text;
  LC_RETURN_IF_ERROR(ReadScalar(ctx, key, node, &text));
  std::string_view s = config_internal::TrimSpace(text);
  if (!s.ends_with('%')) {
    LC_RETURN_IF_ERROR(ReadSize(ctx, key, node, &disk->min_free_bytes));
    disk->min_free_ratio = 0;
    return Status::Ok();
  }
  std::string_view number = config_internal::TrimSpace(s.substr(0, s.size() - 1));
  double percent = -1;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), percent,
                                   std::chars_format::fixed);
  bool parsed = ec == std::errc() && end == number.data() + number.size() && !number.empty() &&
                std::isdigit(static_cast<unsigned char>(number.front()));
  if (!parsed || !(percent >= 0 && percent < 100)) {
    return ctx.Error(key, "invalid free-space floor '" + text +
                              "' (expected a size such as 20GiB, or a percentage from 0% to 99%)");
  }
  disk->min_free_ratio = percent / 100;
  disk->min_free_bytes = 0;
  return Status::Ok();
}

Status ReadDiskField(const ErrorContext& ctx, const std::string& key, std::string_view field,
                     const YAML::Node& value, DiskCacheConfig* disk) {
  if (field == "path") return ReadString(ctx, key, value, &disk->path);
  if (field == "capacity") return ReadSize(ctx, key, value, &disk->capacity);
  if (field == "min_free") return ReadMinFree(ctx, key, value, disk);
  return ctx.Error(key, "unknown key");
}

Status FinishDisk(const ErrorContext& ctx, const std::string& prefix, const DiskCacheConfig& disk) {
  if (disk.path.empty()) {
    return ctx.Error(prefix + ".path", "missing (the cache directory, e.g. /var/cache/lakecache)");
  }
  if (disk.path.front() != '/') {
    return ctx.Error(prefix + ".path", "'" + disk.path + "' is not an absolute path");
  }
  if (disk.capacity == 0) {
    return ctx.Error(prefix + ".capacity",
                     "missing or 0 (the bytes of blocks the directory may hold, e.g. 100GiB)");
  }
  return Status::Ok();
}

Status ReadDisk(const ErrorContext& ctx, const std::string& prefix, const YAML::Node& node,
                DiskCacheConfig* disk) {
  if (!node.IsMap()) {
    return ctx.Error(prefix,
                     "expected a map such as {path: /var/cache/lakecache, capacity: 100GiB}");
  }
  LC_RETURN_IF_ERROR(
      ForEachEntry(ctx, prefix, node,
                   [&](const std::string& field, const std::string& key, const YAML::Node& v) {
                     return ReadDiskField(ctx, key, field, v, disk);
                   }));
  return FinishDisk(ctx, prefix, *disk);
}

// An empty `disks:` is no disk tier, like a missing one.
Status ReadDisks(const ErrorContext& ctx, const YAML::Node& node, CacheConfig* cache) {
  if (node.IsNull()) return Status::Ok();
  if (!node.IsSequence()) {
    return ctx.Error("cache.disks", "expected a list of cache directories, got a " +
                                        std::string(node.IsMap() ? "map" : "single value"));
  }
  std::set<std::string> paths;
  for (size_t i = 0; i < node.size(); ++i) {
    std::string prefix = "cache.disks." + std::to_string(i);
    DiskCacheConfig disk;
    LC_RETURN_IF_ERROR(ReadDisk(ctx, prefix, node[i], &disk));
    if (!paths.insert(disk.path).second) {
      return ctx.Error(prefix + ".path", "'" + disk.path + "' is listed twice");
    }
    cache->disks.push_back(std::move(disk));
  }
  return Status::Ok();
}

// An integer from `lo` to `hi`; the message names `what` it is ("thread count").
Status ReadInteger(const ErrorContext& ctx, const std::string& key, const YAML::Node& node,
                   uint32_t lo, uint32_t hi, std::string_view what, uint32_t* out) {
  std::string text;
  LC_RETURN_IF_ERROR(ReadScalar(ctx, key, node, &text));
  uint32_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < lo || value > hi) {
    return ctx.Error(key, "invalid " + std::string(what) + " '" + text + "' (expected " +
                              std::to_string(lo) + " to " + std::to_string(hi) + ")");
  }
  *out = value;
  return Status::Ok();
}

// A whole percentage from 0% to `hi`% ("50%").
Status ReadPercent(const ErrorContext& ctx, const std::string& key, const YAML::Node& node,
                   uint32_t hi, uint32_t* out) {
  std::string text;
  LC_RETURN_IF_ERROR(ReadScalar(ctx, key, node, &text));
  uint32_t value = 0;
  const char* last = text.data() + text.size() - (text.ends_with('%') ? 1 : 0);
  auto [end, ec] = std::from_chars(text.data(), last, value);
  if (!text.ends_with('%') || ec != std::errc() || end != last || value > hi) {
    return ctx.Error(key, "invalid share '" + text + "' (expected a percentage from 0% to " +
                              std::to_string(hi) + "%)");
  }
  *out = value;
  return Status::Ok();
}

// A list of uids ("[1000, 1001]"); -1 (4294967295) is no uid.
Status ReadUids(const ErrorContext& ctx, const std::string& key, const YAML::Node& node,
                std::vector<uint32_t>* out) {
  out->clear();
  if (node.IsNull()) return Status::Ok();
  if (!node.IsSequence()) {
    return ctx.Error(
        key, "expected a list of uids such as [1000, 1001], got a " + std::string(NodeKind(node)));
  }
  for (size_t i = 0; i < node.size(); ++i) {
    uint32_t uid = 0;
    LC_RETURN_IF_ERROR(
        ReadInteger(ctx, key + "." + std::to_string(i), node[i], 0, 4294967294u, "uid", &uid));
    out->push_back(uid);
  }
  return Status::Ok();
}

Status ReadTransport(const ErrorContext& ctx, const std::string& key, const YAML::Node& node,
                     std::string* out) {
  LC_RETURN_IF_ERROR(ReadScalar(ctx, key, node, out));
  if (*out == "bulk" || *out == "grpc") return Status::Ok();
  return ctx.Error(key, "unknown transport '" + *out + "' (expected bulk or grpc)");
}

Status ReadClientField(const ErrorContext& ctx, const std::string& key, std::string_view name,
                       const YAML::Node& v, ClientConfig* client) {
  if (name == "read_ahead_max") return ReadSize(ctx, key, v, &client->read_ahead_max);
  if (name == "order_hint_window") return ReadSize(ctx, key, v, &client->order_hint_window);
  if (name == "kernel_read_ahead") return ReadSize(ctx, key, v, &client->kernel_read_ahead);
  if (name == "kernel_inodes") {
    return ReadInteger(ctx, key, v, 0, 4'000'000'000u, "inode count", &client->kernel_inodes);
  }
  if (name == "prefetch_threads") {
    return ReadInteger(ctx, key, v, 1, 1024, "thread count", &client->prefetch_threads);
  }
  if (name == "allow_uids") return ReadUids(ctx, key, v, &client->allow_uids);
  if (name == "short_circuit" || name == "shm_prefault" || name == "native" || name == "replicas") {
    std::optional<bool> value;
    LC_RETURN_IF_ERROR(ReadBool(ctx, key, v, &value));
    if (value.has_value()) {
      (name == "short_circuit" ? client->short_circuit
       : name == "native"      ? client->native
       : name == "replicas"    ? client->replicas
                               : client->shm_prefault) = *value;
    }
    return Status::Ok();
  }
  if (name == "transport") return ReadTransport(ctx, key, v, &client->transport);
  if (name == "metadata_dir") {
    LC_RETURN_IF_ERROR(ReadScalar(ctx, key, v, &client->metadata_dir));
    const std::string& dir = client->metadata_dir;
    if (dir.empty() || dir == "off" || dir.starts_with('/')) return Status::Ok();
    return ctx.Error(key, "'" + dir + "' is not an absolute path (or \"off\")");
  }
  if (name == "metadata_memory") {
    LC_RETURN_IF_ERROR(ReadSize(ctx, key, v, &client->metadata_memory));
    if (client->metadata_memory == 0) return ctx.Error(key, "must be more than 0");
    return Status::Ok();
  }
  if (name == "write_budget") return ReadSize(ctx, key, v, &client->write_budget);
  if (name == "write_per_file") return ReadSize(ctx, key, v, &client->write_per_file);
  if (name == "upload_parts_in_flight") {
    return ReadInteger(ctx, key, v, 1, 64, "part count", &client->upload_parts_in_flight);
  }
  if (name != "memory_budget") return ctx.Error(key, "unknown key");
  LC_RETURN_IF_ERROR(ReadSize(ctx, key, v, &client->memory_budget));
  if (client->memory_budget == 0) return ctx.Error(key, "must be more than 0");
  return Status::Ok();
}

// A file being written holds the part being filled and the parts in flight, each at least the
// 8MiB a first part is.
Status CheckClientWrites(const ErrorContext& ctx, const ClientConfig& client) {
  uint64_t min_per_file = (uint64_t{client.upload_parts_in_flight} + 1) * (8ull << 20);
  if (client.write_per_file < min_per_file) {
    return ctx.Error(
        "client.write_per_file",
        "must be at least (upload_parts_in_flight + 1) x 8MiB = " + FormatByteSize(min_per_file));
  }
  if (client.write_budget < client.write_per_file) {
    return ctx.Error("client.write_budget", "must be at least client.write_per_file (" +
                                                FormatByteSize(client.write_per_file) + ")");
  }
  return Status::Ok();
}

}  // namespace

Status ReadCache(const ErrorContext& ctx, const YAML::Node& node, CacheConfig* cache) {
  if (node.IsNull()) return Status::Ok();
  if (!node.IsMap())
    return ctx.Error("cache", "expected a map of memory, disks, policy and replica_share");
  return ForEachEntry(
      ctx, "cache", node,
      [&](const std::string& name, const std::string& key, const YAML::Node& v) -> Status {
        if (name == "memory") return ReadMemory(ctx, v, cache);
        if (name == "disks") return ReadDisks(ctx, v, cache);
        if (name == "policy") return ReadPolicy(ctx, key, v, &cache->policy);
        if (name == "replica_share") return ReadPercent(ctx, key, v, 90, &cache->replica_percent);
        return ctx.Error(key, "unknown key");
      });
}

Status ReadClient(const ErrorContext& ctx, const YAML::Node& node, ClientConfig* client) {
  if (node.IsNull()) return Status::Ok();
  if (!node.IsMap()) {
    return ctx.Error(
        "client",
        "expected a map of read_ahead_max, memory_budget, prefetch_threads, order_hint_window, "
        "kernel_read_ahead, kernel_inodes, short_circuit, replicas, shm_prefault, native, "
        "transport, "
        "allow_uids, write_budget, write_per_file, upload_parts_in_flight, metadata_memory, "
        "metadata_dir");
  }
  LC_RETURN_IF_ERROR(
      ForEachEntry(ctx, "client", node,
                   [&](const std::string& name, const std::string& key, const YAML::Node& v) {
                     return ReadClientField(ctx, key, name, v, client);
                   }));
  return CheckClientWrites(ctx, *client);
}

Status ReadCluster(const ErrorContext& ctx, const YAML::Node& node, ClusterConfig* cluster) {
  if (node.IsNull()) return Status::Ok();
  if (!node.IsMap()) {
    return ctx.Error("cluster",
                     "expected a map of heartbeat_interval, heartbeat_timeout, "
                     "max_worker_capacity, worker_certificate_validity");
  }
  LC_RETURN_IF_ERROR(ForEachEntry(
      ctx, "cluster", node,
      [&](const std::string& name, const std::string& key, const YAML::Node& v) -> Status {
        if (name == "heartbeat_interval") {
          return ReadDuration(ctx, key, v, &cluster->heartbeat_interval);
        }
        if (name == "heartbeat_timeout") {
          return ReadDuration(ctx, key, v, &cluster->heartbeat_timeout);
        }
        if (name == "max_worker_capacity") {
          return ReadSize(ctx, key, v, &cluster->max_worker_capacity);
        }
        if (name == "worker_certificate_validity") {
          return ReadDuration(ctx, key, v, &cluster->worker_certificate_validity);
        }
        return ctx.Error(key, "unknown key");
      }));
  if (cluster->heartbeat_interval <= Duration::zero()) {
    return ctx.Error("cluster.heartbeat_interval", "must be more than 0");
  }
  if (cluster->heartbeat_timeout <= cluster->heartbeat_interval) {
    return ctx.Error("cluster.heartbeat_timeout",
                     "must be longer than cluster.heartbeat_interval (" +
                         FormatDuration(cluster->heartbeat_interval) + ")");
  }
  if (cluster->worker_certificate_validity < std::chrono::seconds(10)) {
    return ctx.Error("cluster.worker_certificate_validity", "must be at least 10s");
  }
  if (cluster->max_worker_capacity == 0) {
    return ctx.Error("cluster.max_worker_capacity", "must be more than 0");
  }
  return Status::Ok();
}

}  // namespace lakecache::config_internal
