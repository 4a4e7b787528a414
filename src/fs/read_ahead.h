// ReadAheadWindow: decides, for one reading stream (an open file handle), which blocks to prefetch.
//
// A stream is sequential once a few reads in a row each continue where the furthest read so far
// ended; a small forward skip (a reader skipping a record) or a read a little behind it (FUSE
// threads deliver neighbouring reads out of order) keeps it sequential; any other jump is random
// access and resets the window. A sequential stream gets a window that starts at one block past the
// one being read and doubles each time the reader enters a new block, up to a cap; a random one
// gets nothing. The window is topped up in batches, once no more than half of it is still ahead of
// the reader, so that neighbouring blocks go out together. Each block is offered once per
// sequential run. Pure logic, no I/O; not thread-safe
// (the handle locks it).
#pragma once

#include <cstdint>

namespace lakecache {

struct ReadAheadOptions {
  uint64_t block_size = 4ull << 20;
  uint64_t file_size = 0;
  uint64_t max_window = 64ull << 20;  // bytes; less than a block (e.g. 0): no read-ahead
  uint64_t forward_skip = 256ull << 10;
  uint64_t backward_slack = 2ull << 20;
  int min_streak = 2;  // reads in a row that advance the stream before any prefetch
};

class ReadAheadWindow {
 public:
  struct Blocks {
    uint64_t first = 0;
    uint64_t end = 0;  // one past the last
    bool empty() const { return first >= end; }
  };

  explicit ReadAheadWindow(const ReadAheadOptions& options);

  // Reports a read of [offset, offset + length); returns the blocks to prefetch now: ahead of the
  // read, not offered before in this sequential run, within the file.
  Blocks OnRead(uint64_t offset, uint64_t length);
  // Blocks from `block` on could not be started (no memory budget): offer them again later.
  void Unissued(uint64_t block);
  // Every block offered in this sequential run: [first, end). Those still unread when the handle
  // closes are read-ahead nobody will read.
  Blocks Offered() const { return {run_first_, issued_end_}; }

  bool sequential() const { return streak_ >= options_.min_streak; }
  uint64_t window_blocks() const { return window_; }

 private:
  void Reset(uint64_t end);

  const ReadAheadOptions options_;
  const uint64_t max_blocks_;
  const uint64_t file_blocks_;
  uint64_t high_water_ = 0;  // end of the furthest read of this run
  int streak_ = 0;
  uint64_t window_ = 0;      // blocks; 0 until the stream is sequential
  uint64_t last_block_ = 0;  // block holding the byte before high_water_
  uint64_t issued_end_ = 0;  // one past the last block offered
  uint64_t run_first_ = 0;   // first block offered in this run
};

}  // namespace lakecache
