// Feeds the bytes as a config file to LoadConfigText (the format chosen by content, as for a file;
// lines "#o key=value" also become `-o` overrides) and to the properties reader, and as numbers to
// common/units.h. Asserts no crash, that a loaded config renders (`config show`) to YAML that loads
// back to the same rendering and shows no secret, and that sizes and durations print and parse
// back exactly.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/config_tree.h"
#include "common/units.h"

namespace lakecache {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A secret shows in the rendering only where a non-secret field holds the same bytes.
void CheckRedacted(const Config& config, const std::string& shown) {
  Config cleared = config;
  for (auto& [name, ns] : cleared.namespaces) ns.secret_key = ns.session_token = Secret();
  std::string without = RenderConfig(cleared);
  for (const auto& [name, ns] : config.namespaces) {
    for (const Secret* s : {&ns.secret_key, &ns.session_token}) {
      if (s->Reveal().size() >= 4 && Count(shown, s->Reveal()) != Count(without, s->Reveal())) {
        __builtin_trap();
      }
    }
  }
}

void CheckConfig(std::string_view text, ConfigFormat format,
                 const std::vector<std::string>& overrides) {
  Result<Config> config = LoadConfigText(text, "fuzz.yaml", format, overrides);
  if (!config.ok()) {
    if (config.status().code() != StatusCode::kInvalidArgument) __builtin_trap();
    return;
  }
  std::string shown = RenderConfig(*config);
  CheckRedacted(*config, shown);
  Result<Config> again = LoadConfigText(shown, "shown.yaml", ConfigFormat::kYaml);
  if (!again.ok() || RenderConfig(*again) != shown) __builtin_trap();
}

// The promise of units.h: what Format* prints parses back to the same value.
void CheckUnits(uint64_t bytes, int64_t ms) {
  Result<uint64_t> size = ParseByteSize(FormatByteSize(bytes));
  if (!size.ok() || *size != bytes) __builtin_trap();
  Result<Duration> parsed = ParseDuration(FormatDuration(Duration(ms)));
  if (!parsed.ok() || parsed->count() != ms) __builtin_trap();
}

}  // namespace
}  // namespace lakecache

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lakecache;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  for (std::string_view rest = text; !rest.empty();) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    if (line.starts_with("#o ")) overrides.emplace_back(line.substr(3));
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
  }
  CheckConfig(text, ConfigFormat::kAuto, overrides);
  (void)config_internal::ParsePropertiesTree(text, "fuzz.properties");
  if (size >= 16) {
    uint64_t bytes = 0, ms = 0;
    std::memcpy(&bytes, data, 8);
    std::memcpy(&ms, data + 8, 8);
    CheckUnits(bytes, static_cast<int64_t>(ms >> 1));  // durations are never negative
  }
  return 0;
}
