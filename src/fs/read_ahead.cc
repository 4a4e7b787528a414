#include "fs/read_ahead.h"

#include <algorithm>

namespace lakecache {

ReadAheadWindow::ReadAheadWindow(const ReadAheadOptions& options)
    : options_(options),
      max_blocks_(options.block_size == 0 ? 0 : options.max_window / options.block_size),
      file_blocks_(options.block_size == 0
                       ? 0
                       : (options.file_size + options.block_size - 1) / options.block_size) {}

void ReadAheadWindow::Reset(uint64_t end) {
  high_water_ = end;
  streak_ = 0;
  window_ = 0;
  issued_end_ = 0;
  run_first_ = 0;
}

ReadAheadWindow::Blocks ReadAheadWindow::OnRead(uint64_t offset, uint64_t length) {
  uint64_t end = offset + length;
  if (length == 0 || max_blocks_ == 0) return {};
  bool near = offset + options_.backward_slack >= high_water_ &&
              offset <= high_water_ + options_.forward_skip;
  if (!near) {
    Reset(end);
    return {};
  }
  if (end <= high_water_) return {};  // a late neighbour: neither advances nor breaks the run
  high_water_ = end;
  if (++streak_ < options_.min_streak) return {};
  uint64_t block = (high_water_ - 1) / options_.block_size;
  if (window_ == 0) {
    window_ = 1;
  } else if (block > last_block_) {
    window_ = std::min(window_ * 2, max_blocks_);
  }
  last_block_ = block;
  // Top the window up in batches: while more than half of it is still ahead of the reader, wait.
  // Consecutive blocks issued together can then share one request (see BlockRunFetch).
  uint64_t ahead = issued_end_ > block + 1 ? issued_end_ - (block + 1) : 0;
  if (ahead * 2 > window_) return {};
  Blocks out;
  out.first = std::max(issued_end_, block + 1);
  out.end = std::min(block + 1 + window_, file_blocks_);
  if (out.empty()) return {};
  if (issued_end_ == 0) run_first_ = out.first;
  issued_end_ = out.end;
  return out;
}

void ReadAheadWindow::Unissued(uint64_t block) { issued_end_ = std::min(issued_end_, block); }

}  // namespace lakecache
