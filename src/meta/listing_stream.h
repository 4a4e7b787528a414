// ListingStream: a folder's listing as the store's pages come, for a reader that starts before
// the last one (the first entries of a folder of a million objects are shown while the other
// 999 pages are listed). Each page is packed on its own (a DirListing, its entries in name
// order) and the entries are numbered across pages in the order they came, so the numbers a
// reader saw stay what they were. It is not the folder's listing: that one (sorted, with this
// mount's changes) is settled into the metadata cache once the last page came. Thread-safe: one
// thread adds, any number read.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "meta/dir_listing.h"

namespace lakecache {

class ListingStream {
 public:
  // Where entry i is: its page and its index there.
  struct Entry {
    std::shared_ptr<const DirListing> page;
    size_t index = 0;
  };

  // The fetching thread: a page came; the listing ended (`status`: OK, or why it failed).
  void Add(DirListing page) EXCLUDES(mu_);
  void Finish(Status status) EXCLUDES(mu_);

  // Entry `i`, once it has come; nullopt once the listing ended without it (status() says
  // whether it failed). Waits for it.
  std::optional<Entry> Wait(size_t i) const EXCLUDES(mu_);
  // The entries that have come, so far.
  size_t size() const EXCLUDES(mu_);
  Status status() const EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  mutable CondVar grew_;  // a page came, or the listing ended
  std::vector<std::shared_ptr<const DirListing>> pages_ GUARDED_BY(mu_);
  std::vector<size_t> starts_ GUARDED_BY(mu_);  // the number of each page's first entry
  size_t size_ GUARDED_BY(mu_) = 0;
  bool done_ GUARDED_BY(mu_) = false;
  Status status_ GUARDED_BY(mu_);
};

}  // namespace lakecache
