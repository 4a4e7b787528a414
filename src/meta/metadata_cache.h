// MetadataCache: the folders and file attributes of one namespace, cached with the namespace's TTL.
//
// Every folder is one object listing (delimiter "/"), fetched once per TTL however many callers ask
// (single-flight per folder); a file's attributes come from its parent folder's listing, so a
// changed object is seen, with its new ETag, when the folder is revalidated after the TTL. A folder
// read in the last quarter of its TTL is listed again in the background (refresh ahead), so one in
// use is relisted before its TTL runs out, with no caller waiting.
// Immutable namespaces never revalidate. Stale-if-error: when a revalidation fails because the
// store did not answer (Status::peer_failed: unreachable, too slow, or an unreadable answer; not a
// 403/404), the cached listing keeps being served for up to `stale_if_error` past its TTL, with one
// warning per folder.
//
// Pinned folders (the tree of a preload, `lakecache load`) are served from their cached listing
// without revalidation until unpinned (`lakecache free`). Anchored folders (the folders above a
// loaded tree) are never waited for: past the TTL their last listing is served at once and
// revalidated in the background (one revalidation in flight per folder; a listing replaces it, a
// failure of any kind keeps it, however old), so new entries in them still show, one call later,
// and no request to the store ever stands in the path of a loaded tree. This mount's own changes
// (NoteEntry, NoteRemoved, NoteFolderMade) outlast listings that do not show them yet for
// `note_grace`: some stores list a write only later (Swift updates its container listings after
// the write when its servers are busy), and a folder just made, or a file just written, must not
// vanish from the mount that made it. Thread-safe; the
// destructor waits for the revalidations in flight (each bounded by `list_timeout`).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>  // std::once_flag
#include <optional>
#include <string>
#include <unordered_map>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/thread_pool.h"
#include "common/units.h"
#include "meta/dir_listing.h"
#include "ufs/object_store.h"

namespace lakecache {

struct MetadataCacheOptions {
  Duration ttl = std::chrono::seconds(60);
  bool immutable = false;
  Duration stale_if_error = std::chrono::hours(1);
  Duration list_timeout = std::chrono::seconds(60);  // one listing, retries included
  // How long a change made through this mount is applied to listings the store gives.
  Duration note_grace = std::chrono::minutes(5);
  const SteadyClock* clock =
      SteadyClock::Real();  // the TTLs' (a test's is fake); outlives the cache
};

class MetadataCache {
 public:
  // `prefix` is the namespace's key prefix: "" or ending in '/'.
  MetadataCache(std::shared_ptr<ObjectStore> store, std::string prefix,
                MetadataCacheOptions options);
  ~MetadataCache();

  // The folder at relative path `dir` ("" is the namespace root; no leading or trailing '/').
  Result<std::shared_ptr<const DirListing>> List(const std::string& dir);

  // The folder as the store lists it now, whatever the TTL (an explicit load: a folder uploaded a
  // moment ago is there); kept as the folder's listing, its pin unchanged. When the store does
  // not answer, the cached listing if there is one, else the store's error.
  Result<std::shared_ptr<const DirListing>> ListFresh(const std::string& dir);

  // The entry at relative path `path` (non-empty); kNotFound if its parent does not list it.
  Result<DirEntry> Stat(const std::string& path);

  enum class PinKind { kPinned, kAnchored };
  // Keeps `listing` as folder `dir`'s listing: kPinned serves it without revalidating until
  // unpinned; kAnchored serves it (or a newer one) at once forever and revalidates it in the
  // background with the TTL.
  void Pin(const std::string& dir, std::shared_ptr<const DirListing> listing,
           PinKind kind = PinKind::kPinned);
  // Unpins and forgets folder `dir` and every folder below it: the next List asks the store.
  // Returns the number of folders forgotten.
  size_t Unpin(const std::string& dir);

  // The store said that an object of folder `dir` is not the version listed: the next List or
  // Stat of the folder asks the store at once, whatever the TTL, immutability or anchoring (a
  // pinned folder becomes anchored; if the store cannot answer, the last listing is served).
  void ExpireFolder(const std::string& dir);

  // A write through this mount changed folder `dir`'s entry `entry.name` (created or replaced
  // it): a cached listing of `dir` shows the change at once, without asking the store. A folder
  // not cached yet is left to its first listing, which the store answers with the change.
  void NoteEntry(const std::string& dir, DirEntry entry);
  // The same for an entry removed (an unlink, a rename's source, an rmdir).
  void NoteRemoved(const std::string& dir, const std::string& name);
  // Folder `dir` was just made through this mount (its marker written): it lists as existing,
  // with what is noted in it, even before the store lists its marker.
  void NoteFolderMade(const std::string& dir);

  // The object key of a relative path.
  std::string ObjectKey(const std::string& path) const { return prefix_ + path; }
  const std::string& prefix() const { return prefix_; }
  ObjectStore& store() const { return *store_; }

  // Background revalidations started and not yet settled: a test's proof that the one a call
  // started is over (or that a call started none).
  int revalidations_in_flight() const { return revalidations_in_flight_.load(); }

 private:
  // One folder's cached listing. `mu` is held while the folder is fetched in the caller's path, so
  // concurrent callers wait for that one listing instead of sending their own; a background
  // revalidation holds it only to take its result.
  struct Slot {
    Mutex mu;
    std::shared_ptr<const DirListing> listing GUARDED_BY(mu);
    Clock::time_point fetched GUARDED_BY(mu);
    bool warned_stale GUARDED_BY(mu) = false;
    bool pinned GUARDED_BY(mu) = false;
    bool anchored GUARDED_BY(mu) = false;
    bool revalidating GUARDED_BY(mu) = false;  // a background revalidation runs
    // The store said an object here changed (ExpireFolder): the next List asks it, once, at once.
    bool changed GUARDED_BY(mu) = false;
    // While serving a stale listing, the store is asked again only after this point, so callers do
    // not each wait for (or start) a request to a store that does not answer.
    Clock::time_point retry_stale_after GUARDED_BY(mu);
    // This mount's changes to the folder, by name, applied to the listings the store gives within
    // `note_grace`: an entry written (`entry`), or removed (none) at wall time `removed_at`.
    struct Note {
      std::optional<DirEntry> entry;
      int64_t removed_at = 0;
      Clock::time_point noted;
    };
    std::map<std::string, Note> notes GUARDED_BY(mu);
    std::optional<Clock::time_point> made GUARDED_BY(mu);  // NoteFolderMade
  };
  using Listed = Result<std::shared_ptr<const DirListing>>;
  std::shared_ptr<Slot> SlotFor(const std::string& dir);
  // Lists folder `dir` from the store.
  Listed Fetch(const std::string& dir) const;
  // Takes `fetched` into `slot`: a listing replaces the cached one; after an error, the cached
  // listing where it may still be served (else the error).
  Listed Settle(const std::string& dir, Slot& slot, Listed fetched) REQUIRES(slot.mu);
  // `listed` (the store's) with the slot's notes younger than `note_grace` applied; older ones
  // are forgotten.
  std::shared_ptr<const DirListing> ApplyNotes(Slot& slot, std::shared_ptr<const DirListing> listed)
      REQUIRES(slot.mu);
  // Starts a background revalidation of folder `dir`, which takes slot->mu to settle: of an
  // anchored folder past its TTL, or `ahead` of the TTL of one in use (a failure then keeps the
  // listing and says nothing). The caller has set slot->revalidating.
  void RevalidateInBackground(const std::string& dir, std::shared_ptr<Slot> slot, bool ahead);

  const std::shared_ptr<ObjectStore> store_;
  const std::string prefix_;
  const MetadataCacheOptions options_;
  Mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<Slot>> slots_ GUARDED_BY(mu_);
  std::atomic<bool> stopping_{false};
  std::atomic<int> revalidations_in_flight_{
      0};  // set by the destructor: queued revalidations are dropped
  std::once_flag revalidator_once_;
  // Made on the first background revalidation; reset first by the destructor.
  std::unique_ptr<ThreadPool> revalidator_;
};

// "a/b/c" -> {"a/b", "c"}; "c" -> {"", "c"}.
std::pair<std::string, std::string> SplitParent(const std::string& path);

}  // namespace lakecache
