// NamespaceTable: the namespaces a mount (or server) serves, each with its object store, key prefix
// and metadata cache.
//
// Built once at start-up from the config; read-only afterwards, so lookups are thread-safe. Opening
// resolves each namespace's credentials and checks that its bucket answers, so a bad endpoint, a
// missing bucket or wrong credentials fail at start-up with a message naming the namespace.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/config.h"
#include "meta/metadata_cache.h"
#include "ufs/store_factory.h"

namespace lakecache {

struct Namespace {
  std::string name;
  NamespaceConfig config;
  std::shared_ptr<ObjectStore> store;
  std::string prefix;  // key prefix within the bucket: "" or ending in '/'
  std::unique_ptr<MetadataCache> meta;
  bool probed_empty = false;  // Open's probe found nothing under the prefix (not an error)
};

// Lists the namespace's root once (max-keys 1) within `timeout` (retries included): a missing
// bucket (kNotFound, naming it), a refused credential or a store that does not answer in time
// (kDeadlineExceeded) fails, naming the namespace; a prefix with nothing under it only sets
// probed_empty, since writes will fill it.
Status ProbeNamespace(Namespace& ns, Clock::duration timeout = std::chrono::seconds(60));

// Where the namespaces' metadata caches keep listings beyond memory.
struct MetadataIndexing {
  std::shared_ptr<ListingIndex> index;  // nullptr: none, every listing in memory (no budget)
  // Bytes of listings in memory (ListingCost), shared evenly among the namespaces.
  uint64_t memory = 256ull << 20;
};

class NamespaceTable {
 public:
  // Opens every namespace of `config`. With `probe`, probes each (ProbeNamespace) within
  // `probe_timeout`, and fails on the first that fails.
  // `indexing` says where listings beyond memory go; the table keeps the index open.
  static Result<std::unique_ptr<NamespaceTable>> Open(
      const Config& config, const StoreOptions& options, bool probe,
      Clock::duration probe_timeout = std::chrono::seconds(60), MetadataIndexing indexing = {});

  // A table over stores the caller opened (cluster mode: stores that read through the cluster).
  // Each namespace's metadata cache uses its config's TTL and immutability.
  struct Source {
    NamespaceConfig config;  // name, uri, block size, metadata TTL, immutable
    std::shared_ptr<ObjectStore> store;
    std::string prefix;  // key prefix within the bucket: "" or ending in '/'
  };
  static std::unique_ptr<NamespaceTable> FromStores(std::vector<Source> sources,
                                                    MetadataIndexing indexing = {});

  // nullptr if there is no such namespace.
  Namespace* Find(const std::string& name) const;
  // The same, or kNotFound naming the namespaces there are.
  Result<Namespace*> Get(const std::string& name) const;
  const std::vector<std::string>& names() const { return names_; }  // sorted

 private:
  void Add(std::unique_ptr<Namespace> ns);

  std::shared_ptr<ListingIndex> index_;  // outlives the namespaces' caches, declared first
  std::map<std::string, std::unique_ptr<Namespace>> namespaces_;
  std::vector<std::string> names_;
};

// The key prefix of a namespace URI's key: "" or ending in '/'.
std::string NormalizePrefix(const std::string& key);

// A path as the protocol and the admin commands name one: relative to the namespace root, no
// leading or trailing '/', no empty, "." or ".." parts ("" is the root). Anything else could name
// keys outside the namespace: kInvalidArgument, naming `what` and the path.
Status CheckRelativePath(std::string_view what, std::string_view path);

}  // namespace lakecache
