#include "cli/cli_context.h"

#include <cstdio>
#include <cstdlib>
#include <ctime>

#include <sys/stat.h>

#include "cache/cache_dir.h"
#include "common/credentials.h"
#include "ufs/store_factory.h"

namespace lakecache::cli {
namespace {

// The namespace whose URI (same scheme and bucket, key prefix) covers `uri`; the longest prefix
// wins.
const NamespaceConfig* FindCoveringNamespace(const Config& config, const ObjectUri& uri) {
  const NamespaceConfig* best = nullptr;
  for (const auto& [name, ns] : config.namespaces) {
    const ObjectUri& loc = ns.location;
    if (loc.scheme != uri.scheme || loc.bucket != uri.bucket) continue;
    if (!uri.key.starts_with(loc.key)) continue;
    if (best == nullptr || loc.key.size() > best->location.key.size()) best = &ns;
  }
  return best;
}

// A local store is rooted at the named directory, or at the parent of anything else, so that
// listing never walks more of the file system than the URI names.
void SplitLocalPath(ObjectUri* root, ObjectUri* target) {
  std::string path = target->key;
  struct stat st;
  bool is_dir = ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  if (is_dir) {
    root->key = path;
    target->key = "";
    return;
  }
  size_t slash = path.rfind('/');
  root->key = slash == 0 ? "/" : path.substr(0, slash);
  target->key = path.substr(slash + 1);
}

const char* EnvOrNull(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

}  // namespace

std::string StoreEndpoint(const NamespaceConfig& ns) {
  const ObjectUri& loc = ns.location;
  if (loc.scheme == UriScheme::kFile || loc.scheme == UriScheme::kSynthetic) return "";
  if (!ns.endpoint.empty()) return ns.endpoint;
  if (!loc.endpoint_host.empty()) return "https://" + loc.endpoint_host;
  return "https://s3." + (ns.region.empty() ? std::string("us-east-1") : ns.region) +
         ".amazonaws.com";
}

Result<Config> CliContext::LoadConfig() const {
  if (flags_.config_file.empty()) {
    if (!flags_.overrides.empty()) {
      return Status::InvalidArgument("-o needs --config FILE (the overrides apply to that file)");
    }
    return Config{};
  }
  Result<Config> config = LoadConfigFile(flags_.config_file, flags_.overrides);
  // --config names input from the user: whatever keeps it from loading (missing, unreadable, not
  // a file, a bad key) is a configuration error, exit 2, never a runtime failure.
  if (!config.ok() && config.status().code() != StatusCode::kNotFound) {
    return Status::InvalidArgument(config.status().message());
  }
  return config;
}

Result<NamespaceConfig> CliContext::NamespaceFor(const std::string& text) const {
  LC_ASSIGN_OR_RETURN(ObjectUri uri, ParseObjectUri(text));
  LC_ASSIGN_OR_RETURN(Config config, LoadConfig());
  NamespaceConfig ns;
  bool endpoint_given = !flags_.endpoint.empty();  // here, not by a config namespace
  if (const NamespaceConfig* covering = FindCoveringNamespace(config, uri)) {
    ns = *covering;
  } else {
    ns.name = uri.scheme == UriScheme::kFile        ? "local"
              : uri.scheme == UriScheme::kSynthetic ? "synthetic"
                                                    : uri.bucket;
    if (const char* ep = EnvOrNull("AWS_ENDPOINT_URL")) {
      ns.endpoint = ep;
      endpoint_given = true;
    }
    if (const char* r = EnvOrNull("AWS_REGION")) {
      ns.region = r;
    } else if (const char* dr = EnvOrNull("AWS_DEFAULT_REGION")) {
      ns.region = dr;
    }
  }
  ns.uri = text;
  ns.location = uri;
  if (!flags_.endpoint.empty()) ns.endpoint = flags_.endpoint;
  if (!flags_.region.empty()) ns.region = flags_.region;
  // The config file's rule for an endpoint without path_style; a namespace that already reads
  // path-style keeps doing so.
  if (endpoint_given && PathStyleByDefault(ns.endpoint)) ns.path_style = true;
  if (flags_.path_style) ns.path_style = true;
  return ns;
}

StoreOptions CliContext::MakeStoreOptions() const {
  StoreOptions options;
  options.http.ca_bundle = flags_.ca_bundle;
  if (options.http.ca_bundle.empty()) {
    if (const char* bundle = EnvOrNull("AWS_CA_BUNDLE")) options.http.ca_bundle = bundle;
  }
  return options;
}

Result<Target> CliContext::Open(const std::string& text) const {
  LC_ASSIGN_OR_RETURN(NamespaceConfig ns, NamespaceFor(text));
  ObjectUri uri = ns.location;
  std::string shown = uri.ToString();
  if (uri.scheme == UriScheme::kFile) SplitLocalPath(&ns.location, &uri);

  LC_ASSIGN_OR_RETURN(Credentials creds, ResolveCredentials(ns));
  LC_ASSIGN_OR_RETURN(std::shared_ptr<ObjectStore> store,
                      OpenObjectStore(ns, creds, MakeStoreOptions()));
  return Target{std::move(uri), std::move(store), std::move(shown), StoreEndpoint(ns)};
}

std::string Iso8601(int64_t mtime) {
  if (mtime <= 0) return "unknown";
  std::time_t t = static_cast<std::time_t>(mtime);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string Counted(uint64_t n, std::string_view one, std::string_view many) {
  std::string out = std::to_string(n) + " ";
  if (n == 1) return out.append(one);
  if (many.empty()) return out.append(one).append("s");
  return out.append(many);
}

void WarnCacheBeyondDisk(const CacheConfig& cache) {
  for (const DiskCacheConfig& disk : cache.disks) {
    if (std::optional<std::string> why = CapacityBeyondDisk(disk)) {
      std::fprintf(stderr, "lakecache: warning: %s\n", why->c_str());
    }
  }
}

int ReportError(const Status& status) {
  std::fprintf(stderr, "lakecache: error: %s\n", status.message().c_str());
  switch (status.code()) {
    case StatusCode::kOk:
      return kExitOk;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
      return kExitUsage;
    default:
      return kExitFailure;
  }
}

std::unique_ptr<WaitNotice> NoticeWaitFor(const std::string& peer, Duration limit) {
  if (peer.empty()) return nullptr;
  WaitNoticeOptions options;
  options.limit = limit;
  return std::make_unique<WaitNotice>(peer, std::move(options));
}

Status ExplainTimeout(const Status& status, const std::string& peer, const std::string& what,
                      Duration limit) {
  if (status.code() != StatusCode::kDeadlineExceeded) return status;
  return Status::DeadlineExceeded(
      "no answer from " + peer + " within " + FormatDuration(limit) + " while " + what + " (" +
      status.message() +
      "): a server that accepts connections and never answers is often a proxy or load "
      "balancer that drops requests; --timeout DURATION waits longer");
}

}  // namespace lakecache::cli
