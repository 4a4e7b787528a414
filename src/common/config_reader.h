// Internal to the config loader: the pieces that read values out of the key tree with messages that
// name the file and the dotted key. Shared by config.cc (namespaces, overrides, rendering) and
// config_sections.cc (the cache and client sections). Not a public API; pure functions.
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "common/config.h"
#include "common/status.h"

namespace lakecache::config_internal {

inline constexpr std::string_view kTopLevel = "(top level)";

// Builds messages of the form "lake.yaml: namespaces.test.uri: what is wrong".
class ErrorContext {
 public:
  ErrorContext(const std::string& source, const std::map<std::string, std::string>& labels)
      : source_(source.empty() ? "<config>" : source), labels_(labels) {}

  Status Error(const std::string& key, std::string_view what) const {
    auto it = labels_.find(key);
    const std::string& name = it == labels_.end() ? key : it->second;
    return Status::InvalidArgument(source_ + ": " + name + ": " + std::string(what));
  }

 private:
  std::string source_;
  const std::map<std::string, std::string>& labels_;
};

// "map", "list" or "empty value", for messages.
std::string_view NodeKind(const YAML::Node& node);

// Calls fn(name, dotted key, value) for each entry of a map; rejects complex and duplicate keys.
template <typename Fn>
Status ForEachEntry(const ErrorContext& ctx, const std::string& parent, const YAML::Node& map,
                    Fn fn) {
  std::set<std::string> seen;
  for (const auto& entry : map) {
    if (!entry.first.IsScalar()) {
      return ctx.Error(parent.empty() ? std::string(kTopLevel) : parent, "keys must be strings");
    }
    const std::string& name = entry.first.Scalar();
    std::string key = parent.empty() ? name : parent + "." + name;
    if (!seen.insert(name).second) return ctx.Error(key, "duplicate key");
    LC_RETURN_IF_ERROR(fn(name, key, entry.second));
  }
  return Status::Ok();
}

// An empty YAML value ("access_key:") reads as an empty, i.e. unset, string. Messages never quote
// the value: secrets are read through here.
Status ReadString(const ErrorContext& ctx, const std::string& key, const YAML::Node& node,
                  std::string* out);
Status ReadSecret(const ErrorContext& ctx, const std::string& key, const YAML::Node& node,
                  Secret* out);
// A scalar that must be present.
Status ReadScalar(const ErrorContext& ctx, const std::string& key, const YAML::Node& node,
                  std::string* out);
Status ReadBool(const ErrorContext& ctx, const std::string& key, const YAML::Node& node,
                std::optional<bool>* out);
Status ReadDuration(const ErrorContext& ctx, const std::string& key, const YAML::Node& node,
                    Duration* out);
Status ReadSize(const ErrorContext& ctx, const std::string& key, const YAML::Node& node,
                uint64_t* out);

// The `cache:` and `client:` sections (config_sections.cc).
Status ReadCache(const ErrorContext& ctx, const YAML::Node& node, CacheConfig* cache);
Status ReadClient(const ErrorContext& ctx, const YAML::Node& node, ClientConfig* client);
Status ReadCluster(const ErrorContext& ctx, const YAML::Node& node, ClusterConfig* cluster);

}  // namespace lakecache::config_internal
