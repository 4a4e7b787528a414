// CliContext: what every command shares — global flags, the loaded config, and how a URI given on
// the command line becomes an ObjectStore.
//
// Used from the main thread only. Exit codes are the same for every command: 0 success, 1 failure
// (I/O, network, access denied, server error), 2 usage error or a path/URI that does not exist.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/config.h"
#include "common/object_uri.h"
#include "common/units.h"
#include "common/wait_notice.h"
#include "ufs/object_store.h"
#include "ufs/store_factory.h"

namespace lakecache::cli {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// How long a command waits for an answer (--timeout): each request to an object store (with its
// retries) or call to a cluster must be answered within it, so an endpoint that accepts
// connections and never answers fails the command in that time; a long listing, a big `cat` or a
// load goes on for as long as answers keep coming.
constexpr Duration kDefaultTimeout = std::chrono::seconds(30);

struct GlobalFlags {
  std::string config_file;
  std::vector<std::string> overrides;  // -o dotted.key=value
  std::string endpoint;
  std::string region;
  bool path_style = false;
  std::string ca_bundle;
  // Events (a worker joining, warnings, a mount's cache stats), never a line per read.
  std::string log_level = "info";
  std::string log_file;
  // --timeout: how long a command waits for an answer from an object store or a cluster.
  Duration timeout = kDefaultTimeout;
};

// An object store opened for a URI, and the key (or prefix) the URI names within it.
struct Target {
  ObjectUri uri;  // its key is the store's: for a local store, relative to the store's folder
  std::shared_ptr<ObjectStore> store;
  std::string shown;     // the whole URI, as the user reads it back ("file:///data/x")
  std::string endpoint;  // the URL its requests go to ("https://s3.us-east-1.amazonaws.com"); empty
                         // for a local folder
};

class CliContext {
 public:
  explicit CliContext(GlobalFlags flags) : flags_(std::move(flags)) {}

  const GlobalFlags& flags() const { return flags_; }

  // Loads --config (with -o overrides); an empty Config when no --config was given.
  Result<Config> LoadConfig() const;

  // The namespace settings for `uri`: those of the --config namespace whose URI covers it (if any),
  // then --endpoint/--region/--path-style and the AWS_* environment defaults.
  Result<NamespaceConfig> NamespaceFor(const std::string& uri) const;

  // Parses `uri` and opens its store: settings from the --config namespace whose URI covers it
  // (if any), then --endpoint/--region/--path-style, credentials as credentials.h resolves them.
  Result<Target> Open(const std::string& uri) const;

  // Object-store options from the flags: --ca-bundle or AWS_CA_BUNDLE.
  StoreOptions MakeStoreOptions() const;

 private:
  GlobalFlags flags_;
};

// Where the requests for `ns` go, as the S3 store picks it ("https://s3.us-east-1.amazonaws.com");
// empty for a local folder.
std::string StoreEndpoint(const NamespaceConfig& ns);

// "2026-01-02T03:04:05Z" for seconds since the epoch; "unknown" for 0 or less.
std::string Iso8601(int64_t mtime);

// "1 file", "2 files", "0 files": `n` and the noun agreeing with it; `many` where the plural is
// not one + "s" ("processes").
std::string Counted(uint64_t n, std::string_view one, std::string_view many = "");

// Prints "lakecache: error: <message>" to stderr and returns the exit code for the status.
int ReportError(const Status& status);

// Prints a warning on stderr for each disk cache directory configured larger than its file system
// (cache/cache_dir.h CapacityBeyondDisk): the server would only log it, where nobody looks first.
void WarnCacheBeyondDisk(const CacheConfig& cache);
// Shows "still waiting for PEER" lines on a terminal while a command waits up to `limit` for
// `peer` (common/wait_notice.h); nothing when `peer` is empty (a local folder).
std::unique_ptr<WaitNotice> NoticeWaitFor(const std::string& peer, Duration limit);

// A wait of `limit` for `peer` that ran out (kDeadlineExceeded) as the user reads it: who did not
// answer, what was asked (`what`: "listing s3://b/"), the bound and how to change it. Any other
// status is returned as it is.
Status ExplainTimeout(const Status& status, const std::string& peer, const std::string& what,
                      Duration limit);

}  // namespace lakecache::cli
