// JindoFS-style properties files ("jfs.namespaces.test.oss.uri = oss://...") mapped onto the keys
// of the YAML format, so users can move over without rewriting their config.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "common/config_tree.h"

namespace lakecache::config_internal {
namespace {

constexpr std::string_view kNamespacesKey = "jfs.namespaces";

// Per-namespace properties keys ("jfs.namespaces.<ns>.<suffix>") and the YAML key each one sets.
// The `.file` keys are ours, not JindoFS's: they name files holding the keys (a Kubernetes Secret
// mounted as files), so the properties file itself need not hold them. So are the write keys
// (`write`, `allow_overwrite`, `allow_delete`), named as in YAML.
struct JfsKey {
  std::string_view suffix;
  std::string_view field;
};
constexpr JfsKey kNamespaceKeys[] = {
    {"mode", "mode"},
    {"oss.uri", "uri"},
    {"oss.access.key", "access_key"},
    {"oss.access.secret", "secret_key"},
    {"oss.access.key.file", "access_key_file"},
    {"oss.access.secret.file", "secret_key_file"},
    {"s3.uri", "uri"},
    {"s3.access.key", "access_key"},
    {"s3.access.secret", "secret_key"},
    {"s3.access.key.file", "access_key_file"},
    {"s3.access.secret.file", "secret_key_file"},
    {"s3.endpoint", "endpoint"},
    {"s3.region", "region"},
    {"write", "write"},
    {"allow_overwrite", "allow_overwrite"},
    {"allow_delete", "allow_delete"},
};

std::string LineLabel(int line, std::string_view key) {
  return "line " + std::to_string(line) + ": " + std::string(key);
}

class PropertiesReader {
 public:
  explicit PropertiesReader(const std::string& source) : source_(source) {
    tree_.root = YAML::Node(YAML::NodeType::Map);
  }

  Status ReadLine(int line, std::string_view text);
  // Checks what only the whole file can tell: every namespace is listed and has a uri.
  Status Finish();
  ConfigTree TakeTree() { return std::move(tree_); }

 private:
  Status Error(int line, std::string_view key, std::string_view what) const {
    return Status::InvalidArgument(source_ + ": " + LineLabel(line, key) + ": " +
                                   std::string(what));
  }
  Status SetNamespaceList(int line, std::string_view value);
  Status SetNamespaceKey(int line, std::string_view key, std::string_view value);

  std::string source_;
  ConfigTree tree_;
  int list_line_ = 0;                      // line of jfs.namespaces; 0 when absent
  std::vector<std::string> listed_;        // names in jfs.namespaces
  std::map<std::string, int> referenced_;  // namespace -> first line with a key of it
  std::map<std::string, int> set_at_;      // YAML key -> line that set it
};

Status PropertiesReader::ReadLine(int line, std::string_view text) {
  text = TrimSpace(text);
  if (text.empty() || text.front() == '#' || text.front() == '!') return Status::Ok();
  size_t eq = text.find('=');
  // The line itself is not quoted: it may hold a secret.
  if (eq == std::string_view::npos) {
    return Status::InvalidArgument(source_ + ": line " + std::to_string(line) +
                                   ": expected 'key = value'");
  }
  std::string_view key = TrimSpace(text.substr(0, eq));
  std::string_view value = TrimSpace(text.substr(eq + 1));
  if (key == kNamespacesKey) return SetNamespaceList(line, value);
  std::string prefix = std::string(kNamespacesKey) + ".";
  if (key.starts_with(prefix)) return SetNamespaceKey(line, key, value);
  return Error(line, key, "unknown key");
}

Status PropertiesReader::SetNamespaceList(int line, std::string_view value) {
  if (list_line_ != 0) {
    return Error(line, kNamespacesKey,
                 "duplicate key (first set on line " + std::to_string(list_line_) + ")");
  }
  list_line_ = line;
  while (!value.empty()) {
    size_t comma = value.find(',');
    std::string_view name = TrimSpace(value.substr(0, comma));
    value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
    if (name.empty()) continue;
    if (!IsValidNamespaceName(name)) {
      return Error(line, kNamespacesKey,
                   "invalid namespace name '" + std::string(name) +
                       "' (use letters, digits, '.', '_' and '-'; not '.' or '..')");
    }
    listed_.emplace_back(name);
    // Keys of the namespace may come before this line; keep what they set.
    YAML::Node entry = tree_.root["namespaces"][std::string(name)];
    if (!entry.IsDefined()) entry = YAML::Node(YAML::NodeType::Map);
    tree_.labels["namespaces." + std::string(name)] = LineLabel(line, kNamespacesKey);
  }
  return Status::Ok();
}

// Matches by suffix, so namespace names that contain '.' still work.
Status PropertiesReader::SetNamespaceKey(int line, std::string_view key, std::string_view value) {
  std::string_view rest = key.substr(kNamespacesKey.size() + 1);
  for (const JfsKey& k : kNamespaceKeys) {
    if (rest.size() <= k.suffix.size() + 1 || !rest.ends_with(k.suffix)) continue;
    std::string_view ns = rest.substr(0, rest.size() - k.suffix.size() - 1);
    if (rest[ns.size()] != '.') continue;
    std::string path = "namespaces." + std::string(ns) + "." + std::string(k.field);
    auto [it, inserted] = set_at_.emplace(path, line);
    if (!inserted) {
      return Error(line, key, "sets the same setting as line " + std::to_string(it->second));
    }
    referenced_.emplace(ns, line);
    tree_.root["namespaces"][std::string(ns)][std::string(k.field)] = std::string(value);
    tree_.labels[path] = LineLabel(line, key);
    return Status::Ok();
  }
  return Error(line, key, "unknown key");
}

Status PropertiesReader::Finish() {
  for (const auto& [ns, line] : referenced_) {
    if (std::find(listed_.begin(), listed_.end(), ns) == listed_.end()) {
      return Status::InvalidArgument(source_ + ": line " + std::to_string(line) + ": namespace '" +
                                     ns + "' is not listed in " + std::string(kNamespacesKey));
    }
  }
  for (const std::string& ns : listed_) {
    std::string prefix = "namespaces." + ns;
    if (set_at_.count(prefix + ".uri") == 0) {
      return Error(
          list_line_, kNamespacesKey,
          "namespace '" + ns + "' has no uri (jfs.namespaces." + ns + ".oss.uri or .s3.uri)");
    }
    // An OSS endpoint comes from the uri ("oss://bucket.endpoint/dir"), so a missing one is a fault
    // of that line.
    if (set_at_.count(prefix + ".endpoint") == 0) {
      tree_.labels[prefix + ".endpoint"] = tree_.labels[prefix + ".uri"];
    }
  }
  return Status::Ok();
}

}  // namespace

bool LooksLikeProperties(std::string_view text) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    if (TrimSpace(text.substr(0, nl)).starts_with("jfs.")) return true;
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return false;
}

Result<ConfigTree> ParsePropertiesTree(std::string_view text, const std::string& source) {
  PropertiesReader reader(source);
  int line = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    LC_RETURN_IF_ERROR(reader.ReadLine(++line, text.substr(0, nl)));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  LC_RETURN_IF_ERROR(reader.Finish());
  return reader.TakeTree();
}

}  // namespace lakecache::config_internal
