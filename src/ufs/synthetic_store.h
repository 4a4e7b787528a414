// SyntheticStore: a read-only ObjectStore of N generated objects, for tests and benchmarks at a
// scale no disk or store server here could hold (10M, 100M objects). Nothing is stored: a key is
// a function of its index, and so are its size, ETag and bytes.
//
// "synthetic://SPEC/prefix", SPEC a comma-separated list:
//   N (or objects=N)   objects in all; k, M and G mean 10^3, 10^6, 10^9 ("1M", "100M")
//   fanout=F           files per folder and folders per folder (default 1000)
//   size=S or S1-S2    each object's size: S, or one in [S1, S2] chosen by its index (default
//                      1KiB-128KiB)
//   seed=X             changes every ETag, size and byte (default 0)
// Objects sit F to a leaf folder; leaf folders F to a parent, as many levels as needed. With
// N = 1M and F = 1000: "d000/f000.bin" ... "d999/f999.bin" (1,000 folders of 1,000 files);
// with F >= N, one folder of N files. Names are zero-padded, so key order is index order.
//
// List follows S3 (byte-wise key order, prefix, delimiter grouping, max_keys over keys and common
// prefixes and at most 1,000, a continuation token naming the last entry) and costs O(page + log N)
// whatever N is. Head and reads of keys that are not in the tree fail with kNotFound; writes with
// kUnimplemented. Thread-safe: it has no mutable state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ufs/object_store.h"

namespace lakecache {

struct SyntheticSpec {
  uint64_t objects = 0;
  uint64_t fanout = 1000;
  uint64_t min_size = 1024;
  uint64_t max_size = 128 * 1024;
  uint64_t seed = 0;

  // Parses SPEC (the URI's bucket part).
  static Result<SyntheticSpec> Parse(std::string_view text);
};

class SyntheticStore : public ObjectStore {
 public:
  explicit SyntheticStore(const SyntheticSpec& spec, std::string name);

  std::string Describe() const override;  // "synthetic://1M,fanout=1000"

  Result<ListPage> List(const ListRequest& request, const IoOptions& options) override;
  Result<ObjectInfo> Head(std::string_view key, const IoOptions& options) override;
  Result<ReadReply> ReadRaw(std::string_view key, uint64_t offset,
                            std::span<const std::span<char>> bufs,
                            const ReadOptions& options) override;

  // The tree, for tests and benchmarks.
  uint64_t objects() const { return spec_.objects; }
  std::string KeyOf(uint64_t index) const;
  ObjectInfo InfoOf(uint64_t index) const;
  // The byte at `offset` of object `index`.
  char ByteOf(uint64_t index, uint64_t offset) const;

 private:
  // The index of `key`, or objects() when no object has that key.
  uint64_t IndexOf(std::string_view key) const;
  // The first index whose key is not below `key` (objects() when none).
  uint64_t LowerBound(std::string_view key) const;
  // The first index whose key neither starts with `prefix` nor sorts before it.
  uint64_t PastPrefix(std::string_view prefix) const;
  Status NotFound(std::string_view key) const;

  SyntheticSpec spec_;
  std::string name_;
  int levels_ = 0;  // folder levels above the files
  int width_ = 1;   // digits of a name
};

}  // namespace lakecache
