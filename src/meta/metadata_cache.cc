#include "meta/metadata_cache.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace lakecache {

std::pair<std::string, std::string> SplitParent(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {"", path};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

MetadataCache::MetadataCache(std::shared_ptr<ObjectStore> store, std::string prefix,
                             MetadataCacheOptions options)
    : store_(std::move(store)), prefix_(std::move(prefix)), options_(std::move(options)) {}

MetadataCache::~MetadataCache() = default;

std::shared_ptr<MetadataCache::Slot> MetadataCache::SlotFor(const std::string& dir) {
  MutexLock lock(&mu_);
  auto& slot = slots_[dir];
  if (!slot) slot = std::make_shared<Slot>();
  return slot;
}

Result<std::shared_ptr<const DirListing>> MetadataCache::List(const std::string& dir) {
  std::shared_ptr<Slot> slot = SlotFor(dir);
  MutexLock lock(&slot->mu);
  if (slot->listing) {
    if (slot->pinned) return slot->listing;
    Clock::time_point now = options_.now();
    bool fresh = options_.immutable || now - slot->fetched < options_.ttl;
    bool within_stale_bound =
        slot->anchored || now - slot->fetched < options_.ttl + options_.stale_if_error;
    bool backing_off = slot->warned_stale && now < slot->retry_stale_after && within_stale_bound;
    if (fresh || backing_off) return slot->listing;
  }
  return Refresh(dir, *slot);
}

Result<std::shared_ptr<const DirListing>> MetadataCache::Refresh(const std::string& dir,
                                                                 Slot& slot) {
  std::string prefix = dir.empty() ? prefix_ : prefix_ + dir + "/";
  auto listed = ListAll(*store_, prefix, "/", IoOptions::WithTimeout(options_.list_timeout));
  Clock::time_point now = options_.now();
  if (listed.ok()) {
    slot.listing = std::make_shared<const DirListing>(DirListing::FromObjects(prefix, *listed));
    slot.fetched = now;
    slot.warned_stale = false;
    return slot.listing;
  }
  const Status& error = listed.status();
  bool unreachable = error.retryable() || error.code() == StatusCode::kDeadlineExceeded ||
                     error.code() == StatusCode::kIoError;
  if (unreachable && slot.listing &&
      (slot.anchored || now - slot.fetched < options_.ttl + options_.stale_if_error)) {
    slot.retry_stale_after =
        now + std::clamp<Duration>(options_.ttl, std::chrono::seconds(1), std::chrono::seconds(10));
    if (!slot.warned_stale) {
      spdlog::warn("serving cached listing of {}/{} past its TTL: revalidation failed: {}",
                   store_->Describe(), prefix, error.ToString());
      slot.warned_stale = true;
    }
    return slot.listing;
  }
  return error;
}

void MetadataCache::Pin(const std::string& dir, std::shared_ptr<const DirListing> listing,
                        PinKind kind) {
  std::shared_ptr<Slot> slot = SlotFor(dir);
  MutexLock lock(&slot->mu);
  if (slot->listing != listing) {
    slot->listing = std::move(listing);
    slot->fetched = options_.now();
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

Result<DirEntry> MetadataCache::Stat(const std::string& path) {
  auto [parent, name] = SplitParent(path);
  LC_ASSIGN_OR_RETURN(std::shared_ptr<const DirListing> listing, List(parent));
  const DirEntry* entry = listing->Find(name);
  if (entry == nullptr) {
    return Status::NotFound(store_->Describe() + "/" + prefix_ + path + ": no such file or folder");
  }
  return *entry;
}

}  // namespace lakecache
