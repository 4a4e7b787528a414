// ConfigTree: the key tree that both config formats are read into before it becomes a Config.
//
// Internal to the config loader (config.cc, config_yaml.cc, config_properties.cc); not a public
// API. YAML is read as is; properties files are mapped onto the same keys, so overrides and
// validation are written once. Value type; no shared state.
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <string_view>

#include "common/result.h"

namespace lakecache::config_internal {

struct ConfigTree {
  YAML::Node root;
  // How to name a dotted key in messages when the user did not write that key: the properties key
  // and its line ("line 3: jfs.namespaces.test.oss.uri"), or "namespaces.test.uri (from -o)".
  std::map<std::string, std::string> labels;
};

// REQUIRES for both: `source` names the text in messages ("lake.yaml").
Result<ConfigTree> ParseYamlTree(std::string_view text, const std::string& source);
Result<ConfigTree> ParsePropertiesTree(std::string_view text, const std::string& source);

// True when some line starts with "jfs." (JindoFS-style keys).
bool LooksLikeProperties(std::string_view text);

std::string_view TrimSpace(std::string_view s);

// Namespace names become directory names under the mount point.
bool IsValidNamespaceName(std::string_view name);

}  // namespace lakecache::config_internal
