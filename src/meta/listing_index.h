// ListingIndex: folder listings on disk, in one LMDB environment (a directory) per process, so a
// process holds in memory only the listings in use and a restarted one serves what it had listed.
//
// Keys are a namespace's scope (its name and URI) and a folder's path; a value is the folder's
// DirListing, the wall-clock time it was listed and whether it is pinned or anchored, with a
// checksum. It is a cache: writes are not synced (a killed process loses nothing, the kernel holds
// its pages; a machine that went down while the index was open finds it rebuilt empty), a torn or
// corrupt index is rebuilt empty (or, found in use, no longer read) with one log line saying so,
// and a full one (its map size, or the disk) stops taking writes with one warning: callers keep
// serving from memory and the store. Thread-safe; concurrent readers never wait for the writer.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/mutex.h"
#include "common/result.h"
#include "meta/dir_listing.h"

struct MDB_env;  // lmdb.h, included by the .cc only

namespace lakecache {

struct ListingIndexOptions {
  // The most the index file may grow to. Address space, not memory: the file grows as it fills.
  uint64_t map_size = 64ull << 30;
  // Start empty: what a previous process left is removed first.
  bool empty = false;
  // Bytes of listings read or written between two drops of the map's pages (Touched).
  uint64_t unmap_every = 64ull << 20;
};

// One folder as the index holds it.
struct IndexedListing {
  std::shared_ptr<const DirListing> listing;
  std::chrono::system_clock::time_point listed;  // when the store listed it
  bool pinned = false;
  bool anchored = false;
};

class ListingIndex {
 public:
  // Opens (or makes) the index in folder `dir`. An index that does not open as one, or that a
  // machine crash may have torn, is rebuilt empty and logged; fails only when `dir` cannot be
  // made or written.
  static Result<std::unique_ptr<ListingIndex>> Open(const std::string& dir,
                                                    ListingIndexOptions options = {});
  ~ListingIndex();  // syncs the file and records a clean close
  ListingIndex(const ListingIndex&) = delete;
  ListingIndex& operator=(const ListingIndex&) = delete;

  // Keeps `folder` as folder `dir` of namespace `scope`, replacing what was there. False when the
  // index is full or unusable (logged once); the caller keeps the listing in memory instead.
  bool Put(std::string_view scope, std::string_view dir, const IndexedListing& folder);
  // Folder `dir` of `scope`, or nothing (never put, erased, unreadable: a corrupt value is
  // erased and logged).
  std::optional<IndexedListing> Get(std::string_view scope, std::string_view dir);
  void Erase(std::string_view scope, std::string_view dir);
  // Erases folder `dir` and every folder below it ("" is the whole namespace); returns how many.
  size_t EraseBelow(std::string_view scope, std::string_view dir);

  const std::string& dir() const { return dir_; }
  // A write found the index full (map size or disk): later writes are still tried.
  bool full() const { return full_.load(); }
  // The index was found corrupt while in use: it is no longer read or written, and is rebuilt
  // at the next open.
  bool broken() const { return broken_.load(); }

  // The value format, exposed for tests: `folder` encoded, and decoded back (nothing when the
  // bytes are not a valid value).
  static std::string Encode(const IndexedListing& folder);
  // Entries [begin, end) of `folder` only (a page of it), in the same format.
  static std::string Encode(const IndexedListing& folder, size_t begin, size_t end);
  static std::optional<IndexedListing> Decode(std::string_view bytes);

 private:
  ListingIndex(std::string dir, MDB_env* env, unsigned dbi, uint64_t unmap_every)
      : dir_(std::move(dir)), env_(env), dbi_(dbi), unmap_every_(unmap_every) {}
  // Takes an LMDB error: full (MDB_MAP_FULL, ENOSPC) warns once, corruption marks the index
  // broken; logs either once.
  void Failed(int rc, std::string_view what);
  // Counts `bytes` of listings read or written through the map; every unmap_every_ of them, the
  // map's pages are dropped from this process's page tables (MADV_DONTNEED): they stay in the
  // page cache, which keeps or reclaims them, and are mapped again when read. Without it the
  // process's RSS would count every page of the index it ever read (gigabytes at 100M objects).
  void Touched(size_t bytes);

  const std::string dir_;
  MDB_env* const env_;
  const unsigned dbi_;  // MDB_dbi
  const uint64_t unmap_every_;
  std::atomic<bool> full_{false};
  std::atomic<bool> broken_{false};
  std::atomic<bool> warned_{false};
  std::atomic<uint64_t> touched_{0};
  // The map of the data file, found by the first Touched that drops its pages.
  Mutex unmap_mu_;
  char* map_ GUARDED_BY(unmap_mu_) = nullptr;
  size_t map_size_ GUARDED_BY(unmap_mu_) = 0;
};

}  // namespace lakecache
