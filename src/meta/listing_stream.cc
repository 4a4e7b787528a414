#include "meta/listing_stream.h"

#include <algorithm>
#include <utility>

namespace lakecache {

void ListingStream::Add(DirListing page) {
  if (page.size() == 0) return;
  auto packed = std::make_shared<const DirListing>(std::move(page));
  MutexLock lock(&mu_);
  starts_.push_back(size_);
  size_ += packed->size();
  pages_.push_back(std::move(packed));
  grew_.SignalAll();
}

void ListingStream::Finish(Status status) {
  MutexLock lock(&mu_);
  done_ = true;
  status_ = std::move(status);
  grew_.SignalAll();
}

std::optional<ListingStream::Entry> ListingStream::Wait(size_t i) const {
  MutexLock lock(&mu_);
  while (i >= size_ && !done_) grew_.Wait(&mu_);
  if (i >= size_) return std::nullopt;
  size_t page =
      static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), i) - starts_.begin()) -
      1;
  return Entry{pages_[page], i - starts_[page]};
}

size_t ListingStream::size() const {
  MutexLock lock(&mu_);
  return size_;
}

Status ListingStream::status() const {
  MutexLock lock(&mu_);
  return status_;
}

}  // namespace lakecache
