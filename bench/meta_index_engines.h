// The engines bench/meta_index compares, behind one small interface: an ordered map of byte
// strings (bytewise order) in one folder, written in atomic batches, read by gets and range scans.
// An Index is open from its construction to its destruction; Put and WaitIdle are called from one
// thread, and each reading thread makes a Reader of its own. An engine error ends the process
// (Die): a benchmark has nothing to retry.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lakecache::bench {

// Prints "meta_index: WHAT" and ends the process (exit status 1) without running atexit handlers.
[[noreturn]] void Die(const std::string& what);

// The first 8 bytes at `p`, for reads that must touch what they read.
uint64_t Load64(const void* p);

class IndexReader {
 public:
  virtual ~IndexReader() = default;
  // False when the key is absent; adds the value's first 8 bytes to `sink`.
  virtual bool Get(const std::string& key, uint64_t* sink) = 0;
  // Reads the entries from `start` on while their keys begin with `start`, at most `limit`;
  // REQUIRES: `start` ends in '\0'.
  virtual uint64_t Scan(const std::string& start, uint64_t limit, uint64_t* sink) = 0;
};

class Index {
 public:
  using Batch = std::vector<std::pair<std::string, std::string>>;
  virtual ~Index() = default;
  virtual void Put(const Batch& batch) = 0;  // atomically: all of it or none after a crash
  virtual void WaitIdle() = 0;               // until no background work (flush, compaction) is left
  virtual std::unique_ptr<IndexReader> NewReader() = 0;
};

struct IndexOptions {
  uint64_t block_cache_mib = 64;  // RocksDB: block cache, index and filter blocks included
  uint64_t map_bytes = 0;         // LMDB: the map size (address space; the file grows with use)
  bool sync = false;              // fsync every batch (RocksDB: WAL sync; LMDB: without NOSYNC)
};

// "rocksdb" or "lmdb", created in `dir` when it is empty.
std::unique_ptr<Index> OpenIndex(std::string_view engine, const std::string& dir,
                                 const IndexOptions& options);

// The settings OpenIndex gives each engine, in one line.
std::string DescribeIndexes(const IndexOptions& options);

}  // namespace lakecache::bench
