#include "common/config_reader.h"

#include <cctype>

#include "common/units.h"

namespace lakecache::config_internal {

std::string_view NodeKind(const YAML::Node& node) {
  if (node.IsMap()) return "map";
  if (node.IsSequence()) return "list";
  return "empty value";
}

Status ReadString(const ErrorContext& ctx, const std::string& key, const YAML::Node& node,
                  std::string* out) {
  if (node.IsNull()) {
    out->clear();
    return Status::Ok();
  }
  if (!node.IsScalar()) {
    return ctx.Error(key, "expected a string, got a " + std::string(NodeKind(node)));
  }
  *out = node.Scalar();
  return Status::Ok();
}

Status ReadSecret(const ErrorContext& ctx, const std::string& key, const YAML::Node& node,
                  Secret* out) {
  std::string value;
  LC_RETURN_IF_ERROR(ReadString(ctx, key, node, &value));
  *out = Secret(std::move(value));
  return Status::Ok();
}

Status ReadScalar(const ErrorContext& ctx, const std::string& key, const YAML::Node& node,
                  std::string* out) {
  if (node.IsScalar()) {
    *out = node.Scalar();
    return Status::Ok();
  }
  if (node.IsNull()) return ctx.Error(key, "missing value");
  return ctx.Error(key, "expected a single value, got a " + std::string(NodeKind(node)));
}

Status ReadBool(const ErrorContext& ctx, const std::string& key, const YAML::Node& node,
                std::optional<bool>* out) {
  std::string text;
  LC_RETURN_IF_ERROR(ReadScalar(ctx, key, node, &text));
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (text == "true" || text == "yes") {
    *out = true;
  } else if (text == "false" || text == "no") {
    *out = false;
  } else {
    return ctx.Error(key,
                     "invalid boolean '" + node.Scalar() + "' (expected true, false, yes or no)");
  }
  return Status::Ok();
}

Status ReadDuration(const ErrorContext& ctx, const std::string& key, const YAML::Node& node,
                    Duration* out) {
  std::string text;
  LC_RETURN_IF_ERROR(ReadScalar(ctx, key, node, &text));
  Result<Duration> d = ParseDuration(text);
  if (!d.ok()) return ctx.Error(key, d.status().message());
  *out = *d;
  return Status::Ok();
}

Status ReadSize(const ErrorContext& ctx, const std::string& key, const YAML::Node& node,
                uint64_t* out) {
  std::string text;
  LC_RETURN_IF_ERROR(ReadScalar(ctx, key, node, &text));
  Result<uint64_t> bytes = ParseByteSize(text);
  if (!bytes.ok()) return ctx.Error(key, bytes.status().message());
  *out = *bytes;
  return Status::Ok();
}

}  // namespace lakecache::config_internal
