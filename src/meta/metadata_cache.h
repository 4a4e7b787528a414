// MetadataCache: the folders and file attributes of one namespace, cached with the namespace's TTL.
//
// Every folder is one object listing (delimiter "/"), fetched once per TTL however many callers ask
// (single-flight per folder); a file's attributes come from its parent folder's listing, so a
// changed object is seen, with its new ETag, when the folder is revalidated after the TTL.
// Immutable namespaces never revalidate. Stale-if-error: when a revalidation fails because the
// store is unreachable (not a 403/404), the cached listing keeps being served for up to
// `stale_if_error` past its TTL, with one warning per folder.
//
// Pinned folders (the tree of a preload, `lakecache load`) are served from their cached listing
// without revalidation until unpinned (`lakecache free`), so a loaded tree lists with the store
// unreachable. Anchored folders (the folders above a loaded tree) revalidate with the TTL as usual,
// but while the store is unreachable their last listing is served however old it is, so the path
// to a loaded tree never breaks; new entries in them still show. Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "common/mutex.h"
#include "common/units.h"
#include "meta/dir_listing.h"
#include "ufs/object_store.h"

namespace lakecache {

struct MetadataCacheOptions {
  Duration ttl = std::chrono::seconds(60);
  bool immutable = false;
  Duration stale_if_error = std::chrono::hours(1);
  Duration list_timeout = std::chrono::seconds(60);  // one listing, retries included
  std::function<Clock::time_point()> now = [] { return Clock::now(); };  // injectable for tests
};

class MetadataCache {
 public:
  // `prefix` is the namespace's key prefix: "" or ending in '/'.
  MetadataCache(std::shared_ptr<ObjectStore> store, std::string prefix,
                MetadataCacheOptions options);
  ~MetadataCache();

  // The folder at relative path `dir` ("" is the namespace root; no leading or trailing '/').
  Result<std::shared_ptr<const DirListing>> List(const std::string& dir);

  // The entry at relative path `path` (non-empty); kNotFound if its parent does not list it.
  Result<DirEntry> Stat(const std::string& path);

  enum class PinKind { kPinned, kAnchored };
  // Keeps `listing` as folder `dir`'s listing: kPinned serves it without revalidating until
  // unpinned; kAnchored revalidates with the TTL but serves the last listing without a time limit
  // while the store is unreachable.
  void Pin(const std::string& dir, std::shared_ptr<const DirListing> listing,
           PinKind kind = PinKind::kPinned);
  // Unpins and forgets folder `dir` and every folder below it: the next List asks the store.
  // Returns the number of folders forgotten.
  size_t Unpin(const std::string& dir);

  // The object key of a relative path.
  std::string ObjectKey(const std::string& path) const { return prefix_ + path; }
  const std::string& prefix() const { return prefix_; }
  ObjectStore& store() const { return *store_; }

 private:
  // One folder's cached listing. `mu` is held while the folder is fetched, so concurrent callers
  // wait for that one listing instead of sending their own.
  struct Slot {
    Mutex mu;
    std::shared_ptr<const DirListing> listing GUARDED_BY(mu);
    Clock::time_point fetched GUARDED_BY(mu);
    bool warned_stale GUARDED_BY(mu) = false;
    bool pinned GUARDED_BY(mu) = false;
    bool anchored GUARDED_BY(mu) = false;
    // While serving a stale listing, the store is asked again only after this point, so callers do
    // not each wait for a store that does not answer.
    Clock::time_point retry_stale_after GUARDED_BY(mu);
  };
  std::shared_ptr<Slot> SlotFor(const std::string& dir);
  Result<std::shared_ptr<const DirListing>> Refresh(const std::string& dir, Slot& slot)
      REQUIRES(slot.mu);

  const std::shared_ptr<ObjectStore> store_;
  const std::string prefix_;
  const MetadataCacheOptions options_;
  Mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<Slot>> slots_ GUARDED_BY(mu_);
};

// "a/b/c" -> {"a/b", "c"}; "c" -> {"", "c"}.
std::pair<std::string, std::string> SplitParent(const std::string& path);

}  // namespace lakecache
