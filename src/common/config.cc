// Config loading shared by both formats: the key tree is read (config_yaml.cc or
// config_properties.cc), `-o` overrides are applied to it, and it is then converted to structs with
// strict validation. Also RenderConfig.
#include "common/config.h"

#include <arpa/inet.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <set>
#include <vector>

#include "common/config_reader.h"
#include "common/config_tree.h"

namespace lakecache {
namespace config_internal {

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool IsValidNamespaceName(std::string_view name) {
  if (name.empty() || name == "." || name == "..") return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

}  // namespace config_internal

namespace {

using config_internal::ConfigTree;

using config_internal::ErrorContext;
using config_internal::ForEachEntry;
using config_internal::kTopLevel;
using config_internal::NodeKind;
using config_internal::ReadBool;
using config_internal::ReadCache;
using config_internal::ReadClient;
using config_internal::ReadCluster;
using config_internal::ReadDuration;
using config_internal::ReadScalar;
using config_internal::ReadSecret;
using config_internal::ReadSize;
using config_internal::ReadString;

// Blocks much smaller than 64KiB cost more in per-block overhead (index entry, object-store
// request) than they save; much larger ones make a small random read fetch and hold too much.
constexpr uint64_t kMinBlockSize = 64ull << 10;
constexpr uint64_t kMaxBlockSize = 256ull << 20;

Status ReadBlockSize(const ErrorContext& ctx, const std::string& key, const YAML::Node& node,
                     uint64_t* out) {
  LC_RETURN_IF_ERROR(ReadSize(ctx, key, node, out));
  if (*out < kMinBlockSize || *out > kMaxBlockSize) {
    return ctx.Error(
        key, "block size " + FormatByteSize(*out) + " out of range (expected 64KiB to 256MiB)");
  }
  return Status::Ok();
}

// A namespace as read, before defaults that depend on other keys are applied.
struct NamespaceDraft {
  NamespaceConfig ns;
  std::optional<bool> path_style;  // as written; unset: derived from the endpoint
  std::optional<bool> immutable;
  std::optional<bool> write;
  std::optional<bool> allow_overwrite;
  std::optional<bool> allow_delete;
};

Status ReadNamespaceField(const ErrorContext& ctx, const std::string& key, std::string_view field,
                          const YAML::Node& value, NamespaceDraft* d) {
  NamespaceConfig& ns = d->ns;
  if (field == "mode") return ReadString(ctx, key, value, &ns.mode);
  if (field == "uri") return ReadString(ctx, key, value, &ns.uri);
  if (field == "endpoint") return ReadString(ctx, key, value, &ns.endpoint);
  if (field == "region") return ReadString(ctx, key, value, &ns.region);
  if (field == "path_style") return ReadBool(ctx, key, value, &d->path_style);
  if (field == "access_key") return ReadString(ctx, key, value, &ns.access_key);
  if (field == "secret_key") return ReadSecret(ctx, key, value, &ns.secret_key);
  if (field == "session_token") return ReadSecret(ctx, key, value, &ns.session_token);
  if (field == "access_key_file") return ReadString(ctx, key, value, &ns.access_key_file);
  if (field == "secret_key_file") return ReadString(ctx, key, value, &ns.secret_key_file);
  if (field == "metadata_ttl") return ReadDuration(ctx, key, value, &ns.metadata_ttl);
  if (field == "immutable") return ReadBool(ctx, key, value, &d->immutable);
  if (field == "block_size") return ReadBlockSize(ctx, key, value, &ns.block_size);
  if (field == "write") return ReadBool(ctx, key, value, &d->write);
  if (field == "allow_overwrite") return ReadBool(ctx, key, value, &d->allow_overwrite);
  if (field == "allow_delete") return ReadBool(ctx, key, value, &d->allow_delete);
  return ctx.Error(key, "unknown key");
}

// "http://127.0.0.1:9000/x" -> "127.0.0.1"; "http://[::1]:9000" -> "::1".
std::string_view EndpointHost(std::string_view endpoint) {
  std::string_view rest = endpoint.substr(endpoint.find("://") + 3);
  rest = rest.substr(0, rest.find('/'));
  if (rest.starts_with("[")) return rest.substr(1, rest.find(']') - 1);
  return rest.substr(0, rest.rfind(':'));
}

bool IsIpOrLocalhost(std::string_view host) {
  std::string h(host);
  unsigned char buf[sizeof(struct in6_addr)];
  return h == "localhost" || inet_pton(AF_INET, h.c_str(), buf) == 1 ||
         inet_pton(AF_INET6, h.c_str(), buf) == 1;
}

Status ResolveEndpoint(const ErrorContext& ctx, const std::string& prefix, NamespaceDraft* d) {
  NamespaceConfig& ns = d->ns;
  if (!ns.endpoint.empty()) {
    if (!ns.endpoint.starts_with("http://") && !ns.endpoint.starts_with("https://")) {
      return ctx.Error(prefix + ".endpoint", "invalid endpoint '" + ns.endpoint +
                                                 "' (expected http://host[:port] or https://host)");
    }
    if (EndpointHost(ns.endpoint).empty()) {
      return ctx.Error(prefix + ".endpoint", "endpoint '" + ns.endpoint + "' has no host");
    }
    ns.path_style = d->path_style.value_or(PathStyleByDefault(ns.endpoint));
    return Status::Ok();
  }
  if (ns.location.scheme == UriScheme::kOss) {
    if (ns.location.endpoint_host.empty()) {
      return ctx.Error(prefix + ".endpoint",
                       "missing: oss:// namespaces need an endpoint; set it or write the uri as "
                       "oss://bucket.endpoint/prefix");
    }
    ns.endpoint = "https://" + ns.location.endpoint_host;
  }
  ns.path_style = d->path_style.value_or(false);  // OSS accepts only virtual-hosted requests
  return Status::Ok();
}

Status CheckCredentialKeys(const ErrorContext& ctx, const std::string& prefix,
                           const NamespaceConfig& ns) {
  if (!ns.access_key.empty() && !ns.access_key_file.empty()) {
    return ctx.Error(prefix + ".access_key_file", "set access_key or access_key_file, not both");
  }
  if (!ns.secret_key.empty() && !ns.secret_key_file.empty()) {
    return ctx.Error(prefix + ".secret_key_file", "set secret_key or secret_key_file, not both");
  }
  bool has_id = !ns.access_key.empty() || !ns.access_key_file.empty();
  bool has_secret = !ns.secret_key.empty() || !ns.secret_key_file.empty();
  if (has_id != has_secret) {
    return ctx.Error(prefix + (has_id ? ".secret_key" : ".access_key"),
                     "missing: access_key and secret_key (or their _file forms) go together");
  }
  if (!ns.session_token.empty() && !has_id) {
    return ctx.Error(prefix + ".session_token", "set without access_key and secret_key");
  }
  return Status::Ok();
}

// Validates a namespace once all its keys are read and fills what depends on several keys.
Status FinishNamespace(const ErrorContext& ctx, const std::string& prefix, NamespaceDraft* d) {
  NamespaceConfig& ns = d->ns;
  if (ns.mode != "cache") {
    return ctx.Error(prefix + ".mode",
                     "unsupported mode '" + ns.mode + "' (the only mode is 'cache')");
  }
  if (ns.uri.empty()) {
    return ctx.Error(prefix + ".uri",
                     "missing (every namespace needs one, e.g. s3://bucket/prefix)");
  }
  Result<ObjectUri> location = ParseObjectUri(ns.uri);
  if (!location.ok()) return ctx.Error(prefix + ".uri", location.status().message());
  ns.location = *location;
  LC_RETURN_IF_ERROR(ResolveEndpoint(ctx, prefix, d));
  if (ns.region.empty()) return ctx.Error(prefix + ".region", "must not be empty");
  ns.immutable = d->immutable.value_or(false);
  ns.write = d->write.value_or(true);
  ns.allow_overwrite = d->allow_overwrite.value_or(false);
  ns.allow_delete = d->allow_delete.value_or(false);
  return CheckCredentialKeys(ctx, prefix, ns);
}

Status ReadNamespace(const ErrorContext& ctx, const std::string& name, const std::string& prefix,
                     const YAML::Node& node, Config* config) {
  if (!config_internal::IsValidNamespaceName(name)) {
    return ctx.Error(prefix, "invalid namespace name '" + name +
                                 "' (use letters, digits, '.', '_' and '-'; not '.' or '..')");
  }
  if (!node.IsMap()) return ctx.Error(prefix, "expected a map of namespace settings");
  NamespaceDraft draft;
  draft.ns.name = name;
  LC_RETURN_IF_ERROR(
      ForEachEntry(ctx, prefix, node,
                   [&](const std::string& field, const std::string& key, const YAML::Node& v) {
                     return ReadNamespaceField(ctx, key, field, v, &draft);
                   }));
  LC_RETURN_IF_ERROR(FinishNamespace(ctx, prefix, &draft));
  config->namespaces.emplace(name, std::move(draft.ns));
  return Status::Ok();
}

// An empty `namespaces:` is zero namespaces, like a missing one.
Status ReadNamespaces(const ErrorContext& ctx, const YAML::Node& node, Config* config) {
  if (node.IsNull()) return Status::Ok();
  if (!node.IsMap()) {
    return ctx.Error("namespaces", "expected a map of namespace name to settings, got a " +
                                       std::string(node.IsSequence() ? "list" : "single value"));
  }
  return ForEachEntry(ctx, "namespaces", node,
                      [&](const std::string& name, const std::string& key, const YAML::Node& v) {
                        return ReadNamespace(ctx, name, key, v, config);
                      });
}

Result<Config> BuildConfig(const ConfigTree& tree, const std::string& source) {
  ErrorContext ctx(source, tree.labels);
  Config config;
  config.source = source;
  const YAML::Node& root = tree.root;
  if (!root.IsDefined() || root.IsNull()) return config;
  if (!root.IsMap()) {
    return ctx.Error(std::string(kTopLevel), "expected a map of sections such as 'namespaces:'");
  }
  LC_RETURN_IF_ERROR(ForEachEntry(
      ctx, "", root, [&](const std::string& name, const std::string& key, const YAML::Node& v) {
        if (name == "namespaces") return ReadNamespaces(ctx, v, &config);
        if (name == "cache") return ReadCache(ctx, v, &config.cache);
        if (name == "client") return ReadClient(ctx, v, &config.client);
        if (name == "cluster") return ReadCluster(ctx, v, &config.cluster);
        return ctx.Error(key, "unknown key");
      }));
  return config;
}

// Splits "a.b.c" into its parts; empty when any part is empty.
std::vector<std::string> SplitDottedKey(std::string_view key) {
  std::vector<std::string> parts;
  while (true) {
    size_t dot = key.find('.');
    std::string_view part = key.substr(0, dot);
    if (part.empty()) return {};
    parts.emplace_back(part);
    if (dot == std::string_view::npos) return parts;
    key.remove_prefix(dot + 1);
  }
}

// Keys whose value is a list, so that an override can create it and address its entries by position
// ("cache.disks.0.path") before the file has any.
bool IsListKey(const std::string& key) {
  return key == "cache.disks" || key == "client.allow_uids";
}

// The entry of `list` at position `part` ("0", "1", ...) for an override; the position one past the
// end appends an entry. `*appended` tells which.
Result<YAML::Node> ListEntry(const std::string& name, const std::string& list_key,
                             const std::string& part, YAML::Node& list, bool* appended) {
  size_t size = list.IsSequence() ? list.size() : 0;
  size_t index = 0;
  auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
  if (ec != std::errc() || end != part.data() + part.size() || index > size) {
    return Status::InvalidArgument(name + ": -o " + list_key + "." + part + ": " + list_key +
                                   " is a list of " + std::to_string(size) +
                                   "; address an entry by position, from 0 to " +
                                   std::to_string(size) + " (which appends one)");
  }
  *appended = index == size;
  if (*appended) list.push_back(YAML::Node());
  return list[index];
}

// Sets one "dotted.key=value" in the tree, creating maps (and list entries) on the way. Keys split
// at every '.', so a namespace whose name contains '.' cannot be addressed. Messages quote the key,
// never the value.
Status ApplyOverride(const std::string& spec, const std::string& name, ConfigTree* tree) {
  size_t eq = spec.find('=');
  std::vector<std::string> parts;
  if (eq != std::string::npos)
    parts = SplitDottedKey(config_internal::TrimSpace(spec.substr(0, eq)));
  if (parts.empty()) {
    std::string shown = eq == std::string::npos ? spec : spec.substr(0, eq) + "=...";
    return Status::InvalidArgument(name + ": -o '" + shown +
                                   "': malformed override (expected dotted.key=value)");
  }
  YAML::Node& root = tree->root;
  if (!root.IsDefined() || root.IsNull()) root.reset(YAML::Node(YAML::NodeType::Map));
  if (!root.IsMap()) {
    return Status::InvalidArgument(name + ": -o " + parts[0] + ": the top level is not a map");
  }
  YAML::Node node = root;
  std::string path;
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string parent = path;
    path += (i == 0 ? "" : ".") + parts[i];
    YAML::Node child;
    bool created = false;
    if (node.IsSequence() || (IsListKey(parent) && !node.IsMap())) {
      LC_ASSIGN_OR_RETURN(YAML::Node entry, ListEntry(name, parent, parts[i], node, &created));
      child.reset(entry);
    } else {
      child.reset(node[parts[i]]);
      created = !child.IsDefined();
    }
    bool last = i + 1 == parts.size();
    if (created || last) tree->labels[path] = path + " (from -o)";
    if (last) {
      child = std::string(config_internal::TrimSpace(spec.substr(eq + 1)));
    } else if (child.IsDefined() && !child.IsMap() && !child.IsSequence() && !child.IsNull()) {
      return Status::InvalidArgument(name + ": -o " + path + ": cannot set keys below " + path +
                                     ": it is not a map");
    }
    node.reset(child);  // reset rebinds the handle; operator= would overwrite the node
  }
  return Status::Ok();
}

Result<std::string> ReadWholeFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(path + ": is a folder, not a config file");
  }
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    int err = errno;
    std::string msg = path + ": cannot open: " + std::strerror(err);
    return err == ENOENT ? Status::NotFound(msg) : Status::IoError(msg);
  }
  std::string text;
  char buf[8192];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  int err = std::ferror(f) ? errno : 0;
  std::fclose(f);
  if (err != 0) return Status::IoError(path + ": cannot read: " + std::strerror(err));
  return text;
}

void EmitNamespace(YAML::Emitter& out, const NamespaceConfig& ns) {
  out << YAML::BeginMap;
  out << YAML::Key << "mode" << YAML::Value << ns.mode;
  out << YAML::Key << "uri" << YAML::Value << ns.uri;
  out << YAML::Key << "endpoint" << YAML::Value << ns.endpoint;
  out << YAML::Key << "region" << YAML::Value << ns.region;
  out << YAML::Key << "path_style" << YAML::Value << ns.path_style;
  out << YAML::Key << "access_key" << YAML::Value << ns.access_key;
  if (!ns.secret_key.empty()) {
    out << YAML::Key << "secret_key" << YAML::Value << ns.secret_key.ToString();
  }
  if (!ns.session_token.empty()) {
    out << YAML::Key << "session_token" << YAML::Value << ns.session_token.ToString();
  }
  out << YAML::Key << "access_key_file" << YAML::Value << ns.access_key_file;
  out << YAML::Key << "secret_key_file" << YAML::Value << ns.secret_key_file;
  out << YAML::Key << "metadata_ttl" << YAML::Value << FormatDuration(ns.metadata_ttl);
  out << YAML::Key << "immutable" << YAML::Value << ns.immutable;
  out << YAML::Key << "block_size" << YAML::Value << FormatByteSize(ns.block_size);
  out << YAML::Key << "write" << YAML::Value << ns.write;
  out << YAML::Key << "allow_overwrite" << YAML::Value << ns.allow_overwrite;
  out << YAML::Key << "allow_delete" << YAML::Value << ns.allow_delete;
  out << YAML::EndMap;
}

// "10%" when a share of the file system is set, else the size.
std::string FormatMinFree(const DiskCacheConfig& disk) {
  if (disk.min_free_ratio <= 0) return FormatByteSize(disk.min_free_bytes);
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g%%", disk.min_free_ratio * 100);
  return text;
}

void EmitCache(YAML::Emitter& out, const CacheConfig& cache) {
  out << YAML::BeginMap;
  out << YAML::Key << "memory" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "capacity" << YAML::Value << FormatByteSize(cache.memory_capacity);
  out << YAML::Key << "huge_pages" << YAML::Value << cache.huge_pages;
  out << YAML::EndMap;
  out << YAML::Key << "disks" << YAML::Value;
  if (cache.disks.empty()) out << YAML::Flow;  // "disks: []"
  out << YAML::BeginSeq;
  for (const DiskCacheConfig& disk : cache.disks) {
    out << YAML::BeginMap;
    out << YAML::Key << "path" << YAML::Value << disk.path;
    out << YAML::Key << "capacity" << YAML::Value << FormatByteSize(disk.capacity);
    out << YAML::Key << "min_free" << YAML::Value << FormatMinFree(disk);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "policy" << YAML::Value << cache.policy;
  out << YAML::Key << "replica_share" << YAML::Value << std::to_string(cache.replica_percent) + "%";
  out << YAML::EndMap;
}

}  // namespace

Result<Config> LoadConfigText(std::string_view text, std::string_view source, ConfigFormat format,
                              const std::vector<std::string>& overrides) {
  std::string src(source);
  std::string name = src.empty() ? "<config>" : src;
  if (format == ConfigFormat::kAuto) {
    format = config_internal::LooksLikeProperties(text) ? ConfigFormat::kProperties
                                                        : ConfigFormat::kYaml;
  }
  try {
    LC_ASSIGN_OR_RETURN(ConfigTree tree, format == ConfigFormat::kProperties
                                             ? config_internal::ParsePropertiesTree(text, name)
                                             : config_internal::ParseYamlTree(text, name));
    for (const std::string& spec : overrides) LC_RETURN_IF_ERROR(ApplyOverride(spec, name, &tree));
    return BuildConfig(tree, src);
  } catch (const YAML::Exception& e) {
    // Not expected once the text has parsed; yaml-cpp's messages name keys, not values.
    return Status::InvalidArgument(name + ": " + e.what());
  }
}

Result<Config> LoadConfigFile(const std::string& path, const std::vector<std::string>& overrides) {
  LC_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  ConfigFormat format =
      path.ends_with(".properties") ? ConfigFormat::kProperties : ConfigFormat::kAuto;
  return LoadConfigText(text, path, format, overrides);
}

bool PathStyleByDefault(std::string_view endpoint) {
  if (endpoint.find("://") == std::string_view::npos) return false;
  return IsIpOrLocalhost(EndpointHost(endpoint));
}

std::string RenderConfig(const Config& config) {
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "namespaces" << YAML::Value << YAML::BeginMap;
  for (const auto& [name, ns] : config.namespaces) {
    out << YAML::Key << name << YAML::Value;
    EmitNamespace(out, ns);
  }
  out << YAML::EndMap;
  out << YAML::Key << "cache" << YAML::Value;
  EmitCache(out, config.cache);
  out << YAML::Key << "client" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "read_ahead_max" << YAML::Value
      << FormatByteSize(config.client.read_ahead_max);
  out << YAML::Key << "memory_budget" << YAML::Value << FormatByteSize(config.client.memory_budget);
  out << YAML::Key << "prefetch_threads" << YAML::Value << config.client.prefetch_threads;
  out << YAML::Key << "order_hint_window" << YAML::Value
      << FormatByteSize(config.client.order_hint_window);
  out << YAML::Key << "kernel_read_ahead" << YAML::Value
      << FormatByteSize(config.client.kernel_read_ahead);
  out << YAML::Key << "short_circuit" << YAML::Value << config.client.short_circuit;
  out << YAML::Key << "replicas" << YAML::Value << config.client.replicas;
  out << YAML::Key << "shm_prefault" << YAML::Value << config.client.shm_prefault;
  out << YAML::Key << "native" << YAML::Value << config.client.native;
  out << YAML::Key << "transport" << YAML::Value << config.client.transport;
  out << YAML::Key << "allow_uids" << YAML::Value << YAML::Flow << config.client.allow_uids;
  out << YAML::Key << "write_budget" << YAML::Value << FormatByteSize(config.client.write_budget);
  out << YAML::Key << "write_per_file" << YAML::Value
      << FormatByteSize(config.client.write_per_file);
  out << YAML::Key << "upload_parts_in_flight" << YAML::Value
      << config.client.upload_parts_in_flight;
  out << YAML::Key << "metadata_memory" << YAML::Value
      << FormatByteSize(config.client.metadata_memory);
  out << YAML::Key << "metadata_dir" << YAML::Value << config.client.metadata_dir;
  out << YAML::Key << "kernel_inodes" << YAML::Value << config.client.kernel_inodes;
  out << YAML::EndMap;
  out << YAML::Key << "cluster" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "heartbeat_interval" << YAML::Value
      << FormatDuration(config.cluster.heartbeat_interval);
  out << YAML::Key << "heartbeat_timeout" << YAML::Value
      << FormatDuration(config.cluster.heartbeat_timeout);
  out << YAML::Key << "max_worker_capacity" << YAML::Value
      << FormatByteSize(config.cluster.max_worker_capacity);
  out << YAML::Key << "worker_certificate_validity" << YAML::Value
      << FormatDuration(config.cluster.worker_certificate_validity);
  out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace lakecache
