// Config: the validated configuration of a lakecache process, loaded from YAML or JindoFS-style
// properties, with command-line overrides.
//
// Loading is strict: an unknown key, a wrong type or a bad value is an InvalidArgument whose message
// names the file, the dotted key and what is wrong ("lake.yaml: namespaces.test.metadata_ttl: invalid
// duration 'x' (expected e.g. 30s, 5m, 250ms)"). Secrets are held as Secret and never printed.
// Later issues add sections (cache, master, worker) as further structs of Config.
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
  std::string endpoint;        // "http://127.0.0.1:9000"; empty: AWS's regional endpoint (or OSS's from uri)
  std::string region = "us-east-1";
  bool path_style = false;
  std::string access_key;  // key id: not secret, may appear in messages
  Secret secret_key;
  Secret session_token;
  std::string access_key_file;  // files whose (trimmed) content is the key id / secret
  std::string secret_key_file;
  Duration metadata_ttl = std::chrono::seconds(60);
  bool immutable = false;
};

struct Config {
  std::string source;  // the file it came from, for messages; empty when built in code
  std::map<std::string, NamespaceConfig> namespaces;
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

// The effective config as YAML, with every secret shown as "<redacted>".
std::string RenderConfig(const Config& config);

}  // namespace lakecache
