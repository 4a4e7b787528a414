// Preloading (`lakecache load`), freeing and per-file cache status, written once for both places a
// cache lives: a cluster's workers (the master runs the job) and a standalone mount's own block
// store. Where blocks go is a BlockSink; what to load, the counting and the progress are here.
//
// RunLoad walks the path (WalkTree: every listing pinned) on a thread of its own and loads every
// block of every file through the sink as the files are listed, in batches, several batches at
// once; a bounded queue between the two keeps the files held at once to a few thousand whatever the
// tree (the listing waits while the loads are behind), and what the job keeps per file once loaded
// is one byte per block (LoadLedger). Counts come from what the sink says the
// cache holds after each batch, never from what was asked. A sink that lost blocks it had loaded
// (a worker died during the job) says so, and the job checks every block again (those on live
// workers answer "already cached"; the lost ones are loaded again elsewhere), so that only blocks
// cached nowhere at the end count as failed.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "meta/namespace_table.h"

namespace lakecache {

// One object version as the cache names it.
struct ObjectSpec {
  std::string key;  // bucket-relative
  std::string etag;
  uint64_t size = 0;
  uint64_t block_size = 0;

  uint64_t blocks() const { return block_size == 0 ? 0 : (size + block_size - 1) / block_size; }
};

struct BlockSpec {
  ObjectSpec object;
  uint64_t index = 0;

  uint64_t length() const;
};

enum class BlockState { kMissing, kLoaded, kAlreadyCached, kFailed };

struct BlockOutcome {
  BlockState state = BlockState::kMissing;
  std::string error;  // kFailed: why
};

// Where a job's blocks go. Thread-safe: RunLoad calls Load from several threads at once.
class BlockSink {
 public:
  virtual ~BlockSink() = default;
  // For each block of namespace `ns`, in order: what the cache holds after the call. With
  // `check_only` nothing is fetched (kAlreadyCached or kMissing).
  virtual std::vector<BlockOutcome> Load(const std::string& ns, std::span<const BlockSpec> blocks,
                                         bool check_only) = 0;
  // Evicts the objects' blocks; returns the number of blocks evicted.
  virtual Result<uint64_t> Free(const std::string& ns, std::span<const ObjectSpec> objects) = 0;
  // True once if blocks reported loaded or cached may have been lost since the last call (a
  // worker failed).
  virtual bool TakeLost() { return false; }
};

struct LoadCounts {
  uint64_t files = 0;
  uint64_t bytes = 0;
};

struct LoadFailure {
  std::string path;  // relative to the namespace root
  std::string error;
};

struct LoadProgress {
  uint64_t dirs = 0;    // listings cached (pinned)
  bool listed = false;  // the walk is done: `total` is final (until then, what is listed so far)
  LoadCounts total;
  uint64_t files_done = 0;    // files whose every block has an outcome (progress)
  LoadCounts loaded;          // files with a block fetched by this job, and the bytes fetched
  LoadCounts already_cached;  // files wholly cached before (and empty files), bytes cached before
  LoadCounts failed;          // files with a block cached nowhere, and those blocks' bytes
  std::vector<LoadFailure> failures;  // final report only; at most LoadOptions::max_failures
  bool done = false;
  bool complete = false;  // done and not cancelled
  double seconds = 0;
};

struct LoadOptions {
  bool recursive = false;
  bool metadata_only = false;
  size_t parallel_batches = 16;
  size_t batch_blocks = 32;
  uint64_t batch_bytes = 16ull << 20;
  std::chrono::milliseconds progress_interval{250};
  size_t max_failures = 1000;
  size_t queue_files = 4096;  // files listed and not yet taken into a batch, at most
};

// Loads `path` (relative to the root of `ns`). `progress` is called from the calling thread about
// every progress_interval and once at the end (done); returning false cancels the job (blocks in
// flight finish). Errors: the walk's (kNotFound for a missing path, the store's listing errors).
Result<LoadProgress> RunLoad(Namespace& ns, const std::string& path, BlockSink& sink,
                             const LoadOptions& options,
                             const std::function<bool(const LoadProgress&)>& progress);

// The cache status of one path: a folder (is_dir, no blocks) or a file's cached blocks.
struct PathStatus {
  DirEntry entry;
  std::string key;  // the object key (a folder's ends in '/')
  uint64_t block_size = 0;
  uint64_t blocks_total = 0;
  uint64_t blocks_cached = 0;
  uint64_t cached_bytes = 0;
};
Result<PathStatus> StatPath(Namespace& ns, const std::string& path, BlockSink& sink);

// Evicts the blocks of the file at `path`, or of a folder's files (recursive: the whole tree), and
// unpins the listings of the folder and below, so the next read lists and fetches again.
struct FreeResult {
  uint64_t files = 0;
  uint64_t blocks_freed = 0;
};
Result<FreeResult> FreePath(Namespace& ns, const std::string& path, bool recursive,
                            BlockSink& sink);

// The blocks of `entry` (a file of `ns`): its object version and each block's index.
ObjectSpec ObjectSpecOf(const Namespace& ns, const std::string& path, const DirEntry& entry);

}  // namespace lakecache
