#include "meta/metadata_cache.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace lakecache {
namespace {

// Background revalidations of anchored folders at once, per cache; more wait their turn.
constexpr size_t kRevalidationThreads = 2;

}  // namespace

std::pair<std::string, std::string> SplitParent(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {"", path};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

MetadataCache::MetadataCache(std::shared_ptr<ObjectStore> store, std::string prefix,
                             MetadataCacheOptions options)
    : store_(std::move(store)), prefix_(std::move(prefix)), options_(std::move(options)) {}

MetadataCache::~MetadataCache() {
  stopping_ = true;
  revalidator_.reset();  // joins: revalidations use the store and the options
}

std::shared_ptr<MetadataCache::Slot> MetadataCache::SlotFor(const std::string& dir) {
  MutexLock lock(&mu_);
  auto& slot = slots_[dir];
  if (!slot) slot = std::make_shared<Slot>();
  return slot;
}

Result<std::shared_ptr<const DirListing>> MetadataCache::List(const std::string& dir) {
  std::shared_ptr<Slot> slot = SlotFor(dir);
  MutexLock lock(&slot->mu);
  if (slot->listing && !slot->changed) {
    if (slot->pinned) return slot->listing;
    Clock::time_point now = options_.clock->Now();
    bool fresh = options_.immutable || now - slot->fetched < options_.ttl;
    if (fresh) {
      // Refresh ahead: a folder read in the last quarter of its TTL is listed again in the
      // background, so a folder in use is never past its TTL with its readers all waiting for
      // its next listing (every reader of an epoch stalled on each folder's relist once a TTL).
      if (!options_.immutable && !slot->revalidating && now >= slot->retry_stale_after &&
          now - slot->fetched >= options_.ttl - options_.ttl / 4) {
        slot->revalidating = true;
        RevalidateInBackground(dir, slot, /*ahead=*/true);
      }
      return slot->listing;
    }
    bool retry_due = now >= slot->retry_stale_after;
    if (slot->anchored) {
      if (!slot->revalidating && retry_due) {
        slot->revalidating = true;
        RevalidateInBackground(dir, slot, /*ahead=*/false);
      }
      return slot->listing;
    }
    bool within_stale_bound = now - slot->fetched < options_.ttl + options_.stale_if_error;
    if (slot->warned_stale && !retry_due && within_stale_bound) return slot->listing;
  }
  return Settle(dir, *slot, Fetch(dir));
}

Result<std::shared_ptr<const DirListing>> MetadataCache::ListFresh(const std::string& dir) {
  std::shared_ptr<Slot> slot = SlotFor(dir);
  MutexLock lock(&slot->mu);
  Listed fetched = Fetch(dir);
  if (fetched.ok()) {
    slot->listing = *fetched;
    slot->fetched = options_.clock->Now();
    slot->warned_stale = false;
    slot->changed = false;
    return fetched;
  }
  if (!slot->listing) return fetched.status();
  spdlog::warn("using the cached listing of {}/{}: the store did not answer: {}",
               store_->Describe(), dir.empty() ? prefix_ : prefix_ + dir + "/",
               fetched.status().ToString());
  return slot->listing;
}

void MetadataCache::NoteEntry(const std::string& dir, DirEntry entry) {
  std::shared_ptr<Slot> slot = SlotFor(dir);
  MutexLock lock(&slot->mu);
  slot->notes[entry.name] = Slot::Note{entry, 0, options_.clock->Now()};
  if (slot->listing) {
    slot->listing = std::make_shared<const DirListing>(slot->listing->With(std::move(entry)));
  }
}

void MetadataCache::NoteRemoved(const std::string& dir, const std::string& name) {
  std::shared_ptr<Slot> slot = SlotFor(dir);
  MutexLock lock(&slot->mu);
  // The fine clock, not time(): file systems with multigrain timestamps stamp a file just
  // written from it, which runs up to a tick ahead of the coarse clock time() reads.
  const int64_t removed_at = std::chrono::duration_cast<std::chrono::seconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
  slot->notes[name] = Slot::Note{std::nullopt, removed_at, options_.clock->Now()};
  if (slot->listing) {
    slot->listing = std::make_shared<const DirListing>(slot->listing->Without(name));
  }
}

void MetadataCache::NoteFolderMade(const std::string& dir) {
  std::shared_ptr<Slot> slot = SlotFor(dir);
  MutexLock lock(&slot->mu);
  slot->made = options_.clock->Now();
  if (slot->listing && !slot->listing->exists()) {
    slot->listing = std::make_shared<const DirListing>(slot->listing->Existing());
  }
}

std::shared_ptr<const DirListing> MetadataCache::ApplyNotes(
    Slot& slot, std::shared_ptr<const DirListing> listed) {
  const Clock::time_point now = options_.clock->Now();
  std::erase_if(slot.notes,
                [&](const auto& n) { return now - n.second.noted > options_.note_grace; });
  if (slot.made && now - *slot.made > options_.note_grace) slot.made.reset();
  if (slot.notes.empty() && !slot.made) return listed;
  DirListing out = slot.made && !listed->exists() ? listed->Existing() : *listed;
  for (const auto& [name, note] : slot.notes) {
    FoundEntry shown = out.Find(name);
    if (!note.entry) {
      // Removed here; a later object of that name (another writer's) shows.
      if (shown != nullptr && shown->mtime <= note.removed_at) out = out.Without(name);
    } else if (shown == nullptr ||
               (shown->etag != note.entry->etag && shown->mtime < note.entry->mtime)) {
      // Not listed yet, or listed as it was before this write: a newer object (another
      // writer's) shows as the store lists it.
      out = out.With(*note.entry);
    }
  }
  return std::make_shared<const DirListing>(std::move(out));
}

MetadataCache::Listed MetadataCache::Fetch(const std::string& dir) const {
  std::string prefix = dir.empty() ? prefix_ : prefix_ + dir + "/";
  DirListingBuilder builder(prefix);
  LC_RETURN_IF_ERROR(ListPages(
      *store_, prefix, "/", IoOptions::WithTimeout(options_.list_timeout), Clock::duration::max(),
      [&builder](ListPage& page) { builder.Add(page.objects, page.common_prefixes); }));
  return std::make_shared<const DirListing>(std::move(builder).Finish());
}

MetadataCache::Listed MetadataCache::Settle(const std::string& dir, Slot& slot, Listed fetched) {
  Clock::time_point now = options_.clock->Now();
  slot.changed = false;
  if (fetched.ok()) {
    slot.listing = ApplyNotes(slot, *fetched);
    slot.fetched = now;
    slot.warned_stale = false;
    return slot.listing;
  }
  const Status& error = fetched.status();
  bool servable = slot.listing &&
                  (slot.anchored || (error.peer_failed() &&
                                     now - slot.fetched < options_.ttl + options_.stale_if_error));
  if (!servable) return error;
  slot.retry_stale_after =
      now + std::clamp<Duration>(options_.ttl, std::chrono::seconds(1), std::chrono::seconds(10));
  if (!slot.warned_stale) {
    spdlog::warn("serving cached listing of {}/{} past its TTL: revalidation failed: {}",
                 store_->Describe(), dir.empty() ? prefix_ : prefix_ + dir + "/", error.ToString());
    slot.warned_stale = true;
  }
  return slot.listing;
}

void MetadataCache::RevalidateInBackground(const std::string& dir, std::shared_ptr<Slot> slot,
                                           bool ahead) {
  std::call_once(revalidator_once_,
                 [this] { revalidator_ = std::make_unique<ThreadPool>(kRevalidationThreads); });
  revalidations_in_flight_.fetch_add(1);
  revalidator_->Post([this, dir, ahead, slot = std::move(slot)] {
    Listed fetched = stopping_ ? Listed(Status::Unavailable("shutting down")) : Fetch(dir);
    MutexLock lock(&slot->mu);
    // Counted off once settled, on every path out, under the lock a List would wait for.
    struct Settled {
      std::atomic<int>* in_flight;
      ~Settled() { in_flight->fetch_sub(1); }
    } settled{&revalidations_in_flight_};
    slot->revalidating = false;
    // A load pinned the folder meanwhile: its listing is the one to keep. The store said an
    // object changed meanwhile: this listing may predate the change, the next List asks again.
    if (slot->pinned || (ahead && slot->changed)) return;
    if (ahead && !fetched.ok()) {
      // The listing is within its TTL still: the first List past it asks the store itself, and
      // decides then what a failure means.
      spdlog::debug("refreshing the listing of {}/{} ahead of its TTL: {}", store_->Describe(),
                    dir.empty() ? prefix_ : prefix_ + dir + "/", fetched.status().ToString());
      slot->retry_stale_after = slot->fetched + options_.ttl;  // not again before the TTL
      return;
    }
    (void)Settle(dir, *slot, std::move(fetched));
  });
}

void MetadataCache::Pin(const std::string& dir, std::shared_ptr<const DirListing> listing,
                        PinKind kind) {
  std::shared_ptr<Slot> slot = SlotFor(dir);
  MutexLock lock(&slot->mu);
  if (slot->listing != listing) {
    slot->listing = std::move(listing);
    slot->fetched = options_.clock->Now();
    slot->warned_stale = false;
  }
  if (kind == PinKind::kPinned) {
    slot->pinned = true;
  } else {
    slot->anchored = true;
  }
}

size_t MetadataCache::Unpin(const std::string& dir) {
  MutexLock lock(&mu_);
  size_t forgotten = 0;
  for (auto it = slots_.begin(); it != slots_.end();) {
    const std::string& name = it->first;
    bool below = dir.empty() || name == dir ||
                 (name.size() > dir.size() && name.starts_with(dir) && name[dir.size()] == '/');
    if (below) {
      it = slots_.erase(it);  // a caller inside List keeps its own reference to the slot
      ++forgotten;
    } else {
      ++it;
    }
  }
  return forgotten;
}

void MetadataCache::ExpireFolder(const std::string& dir) {
  std::shared_ptr<Slot> slot;
  {
    MutexLock lock(&mu_);
    auto it = slots_.find(dir);
    if (it == slots_.end()) return;
    slot = it->second;
  }
  MutexLock lock(&slot->mu);
  if (!slot->listing) return;
  // A pinned folder stays reachable while the store is down, as an anchored one.
  slot->changed = true;
  slot->anchored = slot->anchored || slot->pinned;
  slot->pinned = false;
}

Result<DirEntry> MetadataCache::Stat(const std::string& path) {
  auto [parent, name] = SplitParent(path);
  LC_ASSIGN_OR_RETURN(std::shared_ptr<const DirListing> listing, List(parent));
  FoundEntry entry = listing->Find(name);
  if (entry == nullptr) {
    return Status::NotFound(store_->Describe() + "/" + prefix_ + path + ": no such file or folder");
  }
  return *entry;
}

}  // namespace lakecache
