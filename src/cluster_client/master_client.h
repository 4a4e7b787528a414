// MasterClient: what a cluster mount asks the master, typed over Result<T>: the namespaces, the
// cluster view, folder listings, stats and write notes. GrpcMasterClient calls the masters of a
// MasterSet, following the leader; tests hand ClusterClient a fake instead. Implementations are
// thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "common/units.h"
#include "ufs/object_store.h"

namespace lakecache {

namespace rpc {
class ClusterView;
class ClusterViewRequest;
class NoteWriteRequest;
}  // namespace rpc

// A namespace as the master describes it.
struct ClusterNamespace {
  std::string name;
  std::string uri;
  uint64_t block_size = 0;
  Duration metadata_ttl{};
  bool immutable = false;
  std::string key_prefix;  // "" or ending in '/'
  bool read_only = false;  // what its mounts may do to the store (see NamespaceConfig)
  bool allow_overwrite = false;
  bool allow_delete = false;
};

// One folder (delimiter "/") as the master's metadata cache holds it.
struct ClusterListing {
  std::vector<ObjectInfo> files;  // bucket-relative keys
  std::vector<std::string> dirs;  // bucket-relative prefixes ending in '/'
  bool exists = false;
  std::string next_start_after;  // more entries follow: ListDirPage::start_after of the next page
};

// A page of a folder's listing: the entries after the one named `start_after` ("": from the
// first), at most `max_entries` (0: all).
struct ListDirPage {
  std::string start_after;
  uint32_t max_entries = 0;
};

// A path as the master's metadata cache holds it.
struct ClusterStat {
  ObjectInfo info;  // a folder's key is its prefix, ending in '/'
  bool is_dir = false;
};

class MasterClient {
 public:
  virtual ~MasterClient() = default;

  virtual Result<std::vector<ClusterNamespace>> Namespaces() = 0;
  // The cluster view, `request` carrying the mount's report; any master answers it.
  virtual Result<rpc::ClusterView> View(const rpc::ClusterViewRequest& request) = 0;
  // `revalidate`: the master lists the folder again now rather than serve its cached listing.
  virtual Result<ClusterListing> ListDir(const std::string& ns, const std::string& dir,
                                         const ListDirPage& page, Clock::time_point deadline,
                                         bool revalidate) = 0;
  // kNotFound when nothing is at `path`.
  virtual Result<ClusterStat> Stat(const std::string& ns, const std::string& path,
                                   Clock::time_point deadline) = 0;
  // Tells the master's metadata cache of a write, so every mount's next listing shows it.
  virtual Status NoteWrite(const rpc::NoteWriteRequest& request, Clock::time_point deadline) = 0;
};

}  // namespace lakecache
