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
//
// With a ListingIndex (options.index), every listing the store gives, and every pin, is also kept
// on disk with the wall time it was listed: a folder with no listing in memory is read back from
// the index before the store is asked, aged from that wall time, so the TTL rules above hold
// across a restart (a pinned folder stays pinned). With a memory budget, the least recently used
// listings beyond it leave memory (their slots stay) and are read back on demand. A folder
// changed through this mount, or said changed by the store (ExpireFolder), leaves the index until
// it is put again. Without an index, nothing is written and nothing is evicted.
#pragma once

#include <atomic>
#include <functional>
#include <list>
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
#include "meta/listing_index.h"
#include "meta/listing_stream.h"
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
  // The on-disk index of listings, or nullptr (everything in memory); outlives the cache.
  ListingIndex* index = nullptr;
  // This namespace in the index: its name and URI, so a namespace pointed elsewhere starts empty.
  std::string index_scope;
  // Bytes of listings kept in memory (ListingCost); 0: no bound. Only with an index.
  uint64_t memory_budget = 0;
};

// What a listing is reckoned to cost in memory: its names and ETags and a fixed overhead per
// entry (the strings' and the entry's own size).
uint64_t ListingCost(const DirListing& listing);

class MetadataCache {
 public:
  // `prefix` is the namespace's key prefix: "" or ending in '/'.
  MetadataCache(std::shared_ptr<ObjectStore> store, std::string prefix,
                MetadataCacheOptions options);
  ~MetadataCache();

  // Hands a listing being fetched to its reader as it comes (see List).
  using StreamHook = std::function<void(std::shared_ptr<const ListingStream>)>;

  // The folder at relative path `dir` ("" is the namespace root; no leading or trailing '/').
  // With `on_stream`, a listing fetched from the store that takes more than one page is also
  // handed to it as a ListingStream once the first page came, on this thread, which goes on to
  // list the rest (the call returns when the last came, or the listing failed: the stream ends
  // so too). Not where this mount changed the folder lately: only the whole listing shows that.
  Result<std::shared_ptr<const DirListing>> List(const std::string& dir,
                                                 const StreamHook& on_stream = nullptr);

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
  // Bytes of listings held in memory now (ListingCost); with a budget, at most about the budget
  // once a call returns, unless the index could not take the listings beyond it.
  uint64_t memory_used() const { return memory_used_.load(); }

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
    // When the store listed `listing` (the wall clock: it outlives the process, in the index).
    std::chrono::system_clock::time_point listed_at GUARDED_BY(mu);
    // Whether the index holds `listing` as it is (kYes: it may leave memory); kUnknown until the
    // index was asked.
    enum class Indexed { kUnknown, kYes, kNo };
    Indexed indexed GUARDED_BY(mu) = Indexed::kUnknown;
    std::atomic<uint64_t> cost{0};  // ListingCost of `listing`; written under mu
  };
  using Listed = Result<std::shared_ptr<const DirListing>>;
  std::shared_ptr<Slot> SlotFor(const std::string& dir);
  Result<std::shared_ptr<const DirListing>> ListSlot(const std::string& dir,
                                                     std::shared_ptr<Slot> slot,
                                                     const StreamHook& on_stream = nullptr);
  Result<std::shared_ptr<const DirListing>> ListFreshSlot(const std::string& dir,
                                                          std::shared_ptr<Slot> slot);
  // Sets `slot.listing`, keeping memory_used_ in step.
  void SetListing(Slot& slot, std::shared_ptr<const DirListing> listing) REQUIRES(slot.mu);
  // With an index: a slot without a listing in memory gets the index's, if it has one (a slot
  // never seen before also its age and pin). True when the slot has a listing.
  bool Resident(const std::string& dir, Slot& slot) REQUIRES(slot.mu);
  // Puts the slot's listing in the index; false when it does not fit.
  bool IndexPut(const std::string& dir, Slot& slot) REQUIRES(slot.mu);
  // The slot's listing was changed here: the index's is no longer it.
  void Unindex(const std::string& dir, Slot& slot) REQUIRES(slot.mu);
  // Drops the least recently used listings from memory (into the index) while memory_used_ is
  // over the budget. Called with no slot's lock held.
  void EnforceBudget() EXCLUDES(mu_);
  // Lists folder `dir` from the store.
  Listed Fetch(const std::string& dir, const StreamHook& on_stream = nullptr) const;
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
  Mutex mu_;  // a slot's mu is never taken while mu_ is held, nor mu_ while it is
  std::unordered_map<std::string, std::shared_ptr<Slot>> slots_ GUARDED_BY(mu_);
  // With a budget: the folders by last use, least recent first, and each one's place in it.
  std::list<std::string> lru_ GUARDED_BY(mu_);
  std::unordered_map<const Slot*, std::list<std::string>::iterator> lru_place_ GUARDED_BY(mu_);
  std::atomic<uint64_t> memory_used_{0};
  std::atomic<bool> evicting_{false};  // one thread enforces the budget at a time
  std::atomic<bool> warned_budget_{false};
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
