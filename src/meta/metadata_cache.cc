#include "meta/metadata_cache.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

namespace lakecache {
namespace {

// Background revalidations of anchored folders at once, per cache; more wait their turn.
constexpr size_t kRevalidationThreads = 2;
// Over its budget, a cache drops listings until it holds this share of the budget, so the next
// few listings do not each evict again.
constexpr uint64_t kBudgetLowWaterPercent = 90;

std::string Describe(const ObjectStore& store, const std::string& prefix, const std::string& dir) {
  return store.Describe() + "/" + (dir.empty() ? prefix : prefix + dir + "/");
}

}  // namespace

uint64_t ListingCost(const DirListing& listing) {
  return listing.bytes() + 64;  // and the shared_ptr's control block
}

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
  if (options_.index != nullptr && options_.memory_budget > 0) {
    auto [place, added] = lru_place_.try_emplace(slot.get());
    if (added) {
      place->second = lru_.insert(lru_.end(), dir);
    } else {
      lru_.splice(lru_.end(), lru_, place->second);
    }
  }
  return slot;
}

Result<std::shared_ptr<const DirListing>> MetadataCache::List(const std::string& dir,
                                                              const StreamHook& on_stream) {
  std::shared_ptr<Slot> slot = SlotFor(dir);
  Listed listed = ListSlot(dir, std::move(slot), on_stream);
  EnforceBudget();
  return listed;
}

MetadataCache::Listed MetadataCache::ListSlot(const std::string& dir, std::shared_ptr<Slot> slot,
                                              const StreamHook& on_stream) {
  MutexLock lock(&slot->mu);
  Resident(dir, *slot);
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
  return Settle(dir, *slot, Fetch(dir, slot->notes.empty() ? on_stream : nullptr));
}

Result<std::shared_ptr<const DirListing>> MetadataCache::ListFresh(const std::string& dir) {
  std::shared_ptr<Slot> slot = SlotFor(dir);
  Listed out = ListFreshSlot(dir, std::move(slot));
  EnforceBudget();
  return out;
}

MetadataCache::Listed MetadataCache::ListFreshSlot(const std::string& dir,
                                                   std::shared_ptr<Slot> slot) {
  MutexLock lock(&slot->mu);
  Listed fetched = Fetch(dir);
  if (fetched.ok()) {
    SetListing(*slot, *fetched);
    slot->fetched = options_.clock->Now();
    slot->listed_at = std::chrono::system_clock::now();
    slot->warned_stale = false;
    slot->changed = false;
    IndexPut(dir, *slot);
    return fetched;
  }
  if (!Resident(dir, *slot)) return fetched.status();
  spdlog::warn("using the cached listing of {}: the store did not answer: {}",
               Describe(*store_, prefix_, dir), fetched.status().ToString());
  return slot->listing;
}

void MetadataCache::NoteEntry(const std::string& dir, DirEntry entry) {
  std::shared_ptr<Slot> slot = SlotFor(dir);
  MutexLock lock(&slot->mu);
  slot->notes[entry.name] = Slot::Note{entry, 0, options_.clock->Now()};
  if (Resident(dir, *slot)) {
    SetListing(*slot, std::make_shared<const DirListing>(slot->listing->With(std::move(entry))));
    Unindex(dir, *slot);
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
  if (Resident(dir, *slot)) {
    SetListing(*slot, std::make_shared<const DirListing>(slot->listing->Without(name)));
    Unindex(dir, *slot);
  }
}

void MetadataCache::NoteFolderMade(const std::string& dir) {
  std::shared_ptr<Slot> slot = SlotFor(dir);
  MutexLock lock(&slot->mu);
  slot->made = options_.clock->Now();
  if (Resident(dir, *slot) && !slot->listing->exists()) {
    SetListing(*slot, std::make_shared<const DirListing>(slot->listing->Existing()));
    Unindex(dir, *slot);
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

MetadataCache::Listed MetadataCache::Fetch(const std::string& dir,
                                           const StreamHook& on_stream) const {
  std::string prefix = dir.empty() ? prefix_ : prefix_ + dir + "/";
  DirListingBuilder builder(prefix);
  std::shared_ptr<ListingStream> stream;  // once a page said more are to come
  Status listed = ListPages(*store_, prefix, "/", IoOptions::WithTimeout(options_.list_timeout),
                            Clock::duration::max(), [&](ListPage& page) {
                              builder.Add(page.objects, page.common_prefixes);
                              if (!on_stream || (stream == nullptr && !page.truncated)) return;
                              DirListingBuilder one(prefix);
                              one.Add(page.objects, page.common_prefixes);
                              const bool first = stream == nullptr;
                              if (first) stream = std::make_shared<ListingStream>();
                              stream->Add(std::move(one).Finish());
                              if (first) on_stream(stream);
                            });
  if (stream != nullptr) stream->Finish(listed);
  LC_RETURN_IF_ERROR(listed);
  return std::make_shared<const DirListing>(std::move(builder).Finish());
}

MetadataCache::Listed MetadataCache::Settle(const std::string& dir, Slot& slot, Listed fetched) {
  Clock::time_point now = options_.clock->Now();
  slot.changed = false;
  if (fetched.ok()) {
    SetListing(slot, ApplyNotes(slot, *fetched));
    slot.fetched = now;
    slot.listed_at = std::chrono::system_clock::now();
    slot.warned_stale = false;
    IndexPut(dir, slot);
    return slot.listing;
  }
  Resident(dir, slot);  // a revalidation's slot may have left memory meanwhile
  const Status& error = fetched.status();
  bool servable = slot.listing &&
                  (slot.anchored || (error.peer_failed() &&
                                     now - slot.fetched < options_.ttl + options_.stale_if_error));
  if (!servable) return error;
  slot.retry_stale_after =
      now + std::clamp<Duration>(options_.ttl, std::chrono::seconds(1), std::chrono::seconds(10));
  if (!slot.warned_stale) {
    spdlog::warn("serving cached listing of {} past its TTL: revalidation failed: {}",
                 Describe(*store_, prefix_, dir), error.ToString());
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
      spdlog::debug("refreshing the listing of {} ahead of its TTL: {}",
                    Describe(*store_, prefix_, dir), fetched.status().ToString());
      slot->retry_stale_after = slot->fetched + options_.ttl;  // not again before the TTL
      return;
    }
    (void)Settle(dir, *slot, std::move(fetched));
  });
}

void MetadataCache::Pin(const std::string& dir, std::shared_ptr<const DirListing> listing,
                        PinKind kind) {
  std::shared_ptr<Slot> slot = SlotFor(dir);
  {
    MutexLock lock(&slot->mu);
    if (slot->listing != listing) {
      SetListing(*slot, std::move(listing));
      slot->fetched = options_.clock->Now();
      slot->listed_at = std::chrono::system_clock::now();
      slot->warned_stale = false;
    }
    if (kind == PinKind::kPinned) {
      slot->pinned = true;
    } else {
      slot->anchored = true;
    }
    IndexPut(dir, *slot);  // the pin too: a restarted process serves the folder as pinned
  }
  EnforceBudget();
}

size_t MetadataCache::Unpin(const std::string& dir) {
  MutexLock lock(&mu_);
  size_t forgotten = 0;
  for (auto it = slots_.begin(); it != slots_.end();) {
    const std::string& name = it->first;
    bool below = dir.empty() || name == dir ||
                 (name.size() > dir.size() && name.starts_with(dir) && name[dir.size()] == '/');
    if (below) {
      if (auto place = lru_place_.find(it->second.get()); place != lru_place_.end()) {
        lru_.erase(place->second);
        lru_place_.erase(place);
      }
      memory_used_.fetch_sub(it->second->cost.exchange(0));
      it = slots_.erase(it);  // a caller inside List keeps its own reference to the slot
      ++forgotten;
    } else {
      ++it;
    }
  }
  if (options_.index != nullptr) options_.index->EraseBelow(options_.index_scope, dir);
  return forgotten;
}

void MetadataCache::ExpireFolder(const std::string& dir) {
  std::shared_ptr<Slot> slot;
  {
    MutexLock lock(&mu_);
    auto it = slots_.find(dir);
    if (it != slots_.end()) slot = it->second;
  }
  if (slot == nullptr) {
    // Not in memory: the index's listing may predate the change.
    if (options_.index != nullptr) options_.index->Erase(options_.index_scope, dir);
    return;
  }
  MutexLock lock(&slot->mu);
  if (!Resident(dir, *slot)) return;
  Unindex(dir, *slot);
  // A pinned folder stays reachable while the store is down, as an anchored one.
  slot->changed = true;
  slot->anchored = slot->anchored || slot->pinned;
  slot->pinned = false;
}

void MetadataCache::SetListing(Slot& slot, std::shared_ptr<const DirListing> listing) {
  if (options_.index != nullptr && options_.memory_budget > 0) {
    uint64_t cost = listing ? ListingCost(*listing) : 0;
    uint64_t old = slot.cost.exchange(cost);
    memory_used_.fetch_add(cost);
    memory_used_.fetch_sub(old);
  }
  slot.listing = std::move(listing);
}

bool MetadataCache::Resident(const std::string& dir, Slot& slot) {
  if (slot.listing) return true;
  if (options_.index == nullptr || slot.indexed == Slot::Indexed::kNo) return false;
  std::optional<IndexedListing> kept = options_.index->Get(options_.index_scope, dir);
  if (!kept) {
    slot.indexed = Slot::Indexed::kNo;
    return false;
  }
  if (slot.indexed == Slot::Indexed::kUnknown) {
    // First seen in this process: aged from the wall time the store listed it, pinned as it was.
    auto age = std::max<Clock::duration>(Clock::duration::zero(),
                                         std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::system_clock::now() - kept->listed));
    slot.fetched = options_.clock->Now() - age;
    slot.listed_at = kept->listed;
    slot.pinned = slot.pinned || kept->pinned;
    slot.anchored = slot.anchored || kept->anchored;
  }
  std::shared_ptr<const DirListing> shown = ApplyNotes(slot, kept->listing);
  slot.indexed = shown == kept->listing ? Slot::Indexed::kYes : Slot::Indexed::kNo;
  SetListing(slot, std::move(shown));
  return true;
}

bool MetadataCache::IndexPut(const std::string& dir, Slot& slot) {
  if (options_.index == nullptr || !slot.listing) return false;
  bool put =
      options_.index->Put(options_.index_scope, dir,
                          IndexedListing{slot.listing, slot.listed_at, slot.pinned, slot.anchored});
  slot.indexed = put ? Slot::Indexed::kYes : Slot::Indexed::kNo;
  return put;
}

void MetadataCache::Unindex(const std::string& dir, Slot& slot) {
  if (options_.index == nullptr || slot.indexed == Slot::Indexed::kNo) return;
  options_.index->Erase(options_.index_scope, dir);
  slot.indexed = Slot::Indexed::kNo;
}

void MetadataCache::EnforceBudget() {
  const uint64_t budget = options_.memory_budget;
  if (options_.index == nullptr || budget == 0 || memory_used_.load() <= budget) return;
  if (evicting_.exchange(true)) return;  // another thread is at it
  std::vector<std::pair<std::string, std::shared_ptr<Slot>>> victims;
  {
    MutexLock lock(&mu_);
    const uint64_t used = memory_used_.load();
    const uint64_t over = used - std::min(used, budget / 100 * kBudgetLowWaterPercent);
    uint64_t picked = 0;
    for (auto it = lru_.begin(); it != lru_.end() && picked < over; ++it) {
      auto found = slots_.find(*it);
      uint64_t cost = found == slots_.end() ? 0 : found->second->cost.load();
      if (cost == 0) continue;
      victims.emplace_back(*it, found->second);
      picked += cost;
    }
  }
  size_t kept = 0;
  for (const auto& victim : victims) {
    Slot& slot = *victim.second;
    MutexLock lock(&slot.mu);
    if (!slot.listing) continue;
    if (slot.indexed != Slot::Indexed::kYes && !IndexPut(victim.first, slot)) {
      ++kept;  // the index is full: it stays in memory
      continue;
    }
    SetListing(slot, nullptr);
  }
  {
    // Out of the order until used again, so the next walk does not pass over them.
    MutexLock lock(&mu_);
    for (const auto& victim : victims) {
      auto place = lru_place_.find(victim.second.get());
      if (place == lru_place_.end() || victim.second->cost.load() != 0) continue;
      lru_.erase(place->second);
      lru_place_.erase(place);
    }
  }
  evicting_ = false;
  if (kept > 0 && !warned_budget_.exchange(true)) {
    spdlog::warn(
        "metadata of {}: over its memory budget ({} bytes) and the listing index cannot take "
        "more: listings stay in memory",
        Describe(*store_, prefix_, ""), budget);
  }
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
