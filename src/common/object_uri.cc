#include "common/object_uri.h"

namespace lakecache {

std::string_view UriSchemeName(UriScheme scheme) {
  switch (scheme) {
    case UriScheme::kS3:
      return "s3";
    case UriScheme::kOss:
      return "oss";
    case UriScheme::kFile:
      return "file";
    case UriScheme::kSynthetic:
      return "synthetic";
  }
  return "?";
}

std::string ObjectUri::ToString() const {
  std::string out(UriSchemeName(scheme));
  out += "://";
  if (scheme == UriScheme::kFile) return out + key;
  out += bucket;
  if (!key.empty()) out += "/" + key;
  return out;
}

Result<ObjectUri> ParseObjectUri(std::string_view text) {
  ObjectUri uri;
  size_t sep = text.find("://");
  if (sep == std::string_view::npos) {
    return Status::InvalidArgument(
        "invalid URI '" + std::string(text) +
        "' (expected s3://bucket/prefix, oss://bucket/prefix or file:///dir)");
  }
  std::string_view scheme = text.substr(0, sep);
  std::string_view rest = text.substr(sep + 3);
  if (scheme == "s3" || scheme == "s3a") {
    uri.scheme = UriScheme::kS3;
  } else if (scheme == "oss") {
    uri.scheme = UriScheme::kOss;
  } else if (scheme == "synthetic") {
    uri.scheme = UriScheme::kSynthetic;
  } else if (scheme == "file") {
    uri.scheme = UriScheme::kFile;
    if (rest.empty() || rest.front() != '/') {
      return Status::InvalidArgument("invalid URI '" + std::string(text) +
                                     "': file URIs need an absolute path, e.g. file:///data");
    }
    uri.key = std::string(rest);
    while (uri.key.size() > 1 && uri.key.back() == '/') uri.key.pop_back();
    return uri;
  } else {
    return Status::InvalidArgument("unsupported URI scheme '" + std::string(scheme) + "' in '" +
                                   std::string(text) + "' (expected s3, oss, file or synthetic)");
  }
  size_t slash = rest.find('/');
  std::string_view host = rest.substr(0, slash);
  // "s3://bucket//x" names key "x": a key never starts with '/' (object_uri.h), as namespace
  // prefixes do not (NormalizePrefix).
  if (slash != std::string_view::npos) {
    std::string_view key = rest.substr(slash + 1);
    while (key.starts_with('/')) key.remove_prefix(1);
    uri.key = std::string(key);
  }
  if (uri.scheme == UriScheme::kOss) {
    size_t dot = host.find('.');
    if (dot != std::string_view::npos) {
      uri.endpoint_host = std::string(host.substr(dot + 1));
      host = host.substr(0, dot);
    }
  }
  if (host.empty()) {
    return Status::InvalidArgument("invalid URI '" + std::string(text) + "': missing bucket name");
  }
  uri.bucket = std::string(host);
  return uri;
}

}  // namespace lakecache
