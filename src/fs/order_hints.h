// OrderHints: the orders in which readers said they will open files, and the prefetch that runs
// ahead of them.
//
// A training job's sampler knows, at the start of an epoch, the order of every file it will read;
// no cache can guess a shuffled order, so each small file of an epoch would otherwise be a cold
// request whose latency nothing hides. The job writes the order to the mount's control file
// (`<mountpoint>/.lakecache/prefetch`, see FileSystem), one path per line, relative to the mount's
// root, and this class fetches ahead in that order: many files at once, with never more than
// `window` bytes fetched and not yet opened.
//
// An order belongs to the process that wrote it: its next write without O_APPEND replaces it, a
// write with O_APPEND extends it. Readers are matched by file, not by process (a DataLoader's
// worker processes read what its main process announced): the open of a file in the order marks
// it read, so its bytes leave the window. A wrong or stale hint costs at most one window of
// useless fetches: a file fetched and not opened while readers went on `lag` files past it is
// dropped (its bytes given back), nothing is fetched that far behind the readers, and an order
// that nothing matched or extended for `idle` is dropped whole. It never blocks a read: paths are
// resolved and fetches started on this class's own thread, and the fetches run on the target's
// pool. Thread-safe.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cache/block_key.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "common/result.h"

namespace lakecache {

struct Namespace;

// One file of an order, once its path is resolved.
struct HintedFile {
  Namespace* ns = nullptr;
  std::string object_key;
  std::string etag;
  uint64_t size = 0;
  uint64_t block_size = 0;
  ContentId content;

  uint64_t blocks() const { return block_size == 0 ? 0 : (size + block_size - 1) / block_size; }
  // The blocks an order hint fetches: those within the first `head` bytes (at least one).
  uint64_t HeadBlocks(uint64_t head) const;
  uint64_t BlockBytes(uint64_t index) const;
};

// Where the hinted files come from and go to: the mount's file system.
class HintTarget {
 public:
  virtual ~HintTarget() = default;
  // The file at `path` (relative to the mount's root, normalised); an error for anything else.
  virtual Result<HintedFile> Resolve(const std::string& path) = 0;
  // Starts fetching blocks from `first` on, without waiting for them; returns how many (from
  // `first`) are started or already held, stopping at the first the memory budget cannot take now.
  // At most `limit` blocks.
  virtual uint64_t Fetch(const HintedFile& file, uint64_t first, uint64_t limit) = 0;
  // What was fetched of `file` and not read is not wanted any more.
  virtual void Drop(const HintedFile& file) = 0;
};

struct OrderHintOptions {
  uint64_t window = 256ull << 20;  // bytes fetched and not yet opened, over every order
  size_t lag = 8192;               // files readers may go past one before it is given up
  std::chrono::milliseconds idle{std::chrono::minutes(2)};
  size_t max_orders = 16;  // the least recently used goes first
  // Of a large file only its head is fetched: its reader's sequential read-ahead fetches the rest
  // in step with the reads (fetching a whole shard ahead would compete with the read-ahead of
  // the shard being read, for the memory budget and the link).
  uint64_t head = 8ull << 20;
  std::chrono::milliseconds budget_retry{20};      // after the memory budget refused a fetch
  const SteadyClock* clock = SteadyClock::Real();  // of `idle` and `budget_retry`; outlives this
};

class OrderHints {
 public:
  OrderHints(HintTarget* target, OrderHintOptions options);
  ~OrderHints();
  OrderHints(const OrderHints&) = delete;
  OrderHints& operator=(const OrderHints&) = delete;

  // A writer of the control file opened it: `process` (0 if unknown: an order of its own) starts
  // a new order, or extends its current one when `append`. Its paths are relative to `prefix`
  // (a folder of the mount, "" or ending in '/'). Returns the writer's id.
  uint64_t BeginWrite(pid_t process, bool append, std::string prefix = "");
  // Bytes the writer wrote: lines of paths, the last one completed by the next write or the end.
  void Write(uint64_t writer, std::string_view bytes);
  void EndWrite(uint64_t writer);

  // A reader opened the file at `path` (relative to the mount's root, as hinted).
  void Opened(std::string_view path);

  // One line per order, for a read of the control file.
  std::string Describe() const;

  struct Counters {
    uint64_t files_hinted = 0;
    uint64_t files_fetched = 0;  // fetches started (or found held) for hinted files
    uint64_t bytes_fetched = 0;
    uint64_t files_read = 0;     // hinted files opened after their fetch started
    uint64_t files_dropped = 0;  // fetched, then given up unread
    uint64_t files_missing = 0;  // paths that named no file
  };
  Counters counters() const;
  uint64_t bytes_ahead() const;

  // "a/./b//c" -> "a/b/c"; empty for a path that leaves the root ("..") or names nothing.
  static std::string Normalize(std::string_view path);

 private:
  enum class State : uint8_t { kPending, kFetching, kFetched, kRead, kMissing, kDropped };
  struct Entry {
    std::string path;                  // until resolved
    std::unique_ptr<HintedFile> file;  // while fetched and unread
    uint64_t blocks_started = 0;
    uint64_t bytes_started = 0;
    State state = State::kPending;
    bool opened = false;  // a reader opened it while its fetch was being started
  };
  struct Order {
    uint64_t id = 0;
    pid_t process = 0;
    std::vector<Entry> entries;
    // Hash of a path -> its first position (a collision only misplaces a hint, never a byte).
    std::unordered_map<uint64_t, size_t> index;
    size_t next = 0;      // the next entry to fetch
    size_t furthest = 0;  // one past the furthest entry read
    size_t swept = 0;     // entries before it are settled
    std::string partial;  // a line not yet ended
    int writers = 0;
    std::chrono::steady_clock::time_point active;  // last match or write
    std::chrono::steady_clock::time_point retry_at;
  };
  struct Work {
    uint64_t order = 0;
    size_t entry = 0;
    std::string path;                  // to resolve, when `file` is null
    std::unique_ptr<HintedFile> file;  // resolved before
    uint64_t first_block = 0;
  };

  void Run() EXCLUDES(mu_);
  // The next entry to fetch, round robin over the orders; false when nothing is due now (*wake:
  // when to look again).
  bool NextWork(Work* work, std::chrono::steady_clock::time_point* wake) REQUIRES(mu_);
  // Settles a fetch of `work`; returns what is to be dropped (the order is gone or went past it).
  std::unique_ptr<HintedFile> Finish(Work& work, Result<HintedFile> resolved, uint64_t started)
      REQUIRES(mu_);
  Order* FindOrder(uint64_t id) REQUIRES(mu_);
  void AddLine(Order& order, const std::string& prefix, std::string_view line) REQUIRES(mu_);
  // Gives up fetched entries readers went `lag` past; collects them into *drop.
  void Sweep(Order& order, std::vector<std::unique_ptr<HintedFile>>* drop) REQUIRES(mu_);
  // Removes the order, collecting its unread fetched files into *drop.
  void Remove(size_t at, std::vector<std::unique_ptr<HintedFile>>* drop) REQUIRES(mu_);
  void Release(Entry& e, std::vector<std::unique_ptr<HintedFile>>* drop) REQUIRES(mu_);
  // Holds fetched bytes no reader has opened (counted in ahead_).
  static bool Unread(const Entry& e);
  void DropAll(std::vector<std::unique_ptr<HintedFile>> files);

  HintTarget* const target_;
  const OrderHintOptions options_;
  mutable Mutex mu_;
  CondVar cv_;
  std::vector<std::unique_ptr<Order>> orders_ GUARDED_BY(mu_);
  struct Writer {
    uint64_t order = 0;
    std::string prefix;
  };
  std::unordered_map<uint64_t, Writer> writers_ GUARDED_BY(mu_);
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  size_t turn_ GUARDED_BY(mu_) = 0;     // round robin over orders_
  uint64_t ahead_ GUARDED_BY(mu_) = 0;  // bytes fetched, not yet read or dropped
  std::atomic<size_t> live_orders_{0};  // Opened's quick way out
  Counters counters_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace lakecache
