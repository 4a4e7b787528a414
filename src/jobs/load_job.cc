#include "jobs/load_job.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>

#include "common/bounded_queue.h"
#include "common/mutex.h"
#include "common/thread_pool.h"
#include "jobs/load_ledger.h"
#include "jobs/tree_walk.h"

namespace lakecache {
namespace {

constexpr size_t kFreeBatch = 1000;  // objects per Free call
// Reasons of failed blocks a job keeps at least (LoadLedger): a report lists at most
// max_failures files, but blocks that failed at first may load in a later pass.
constexpr size_t kMinReasonsKept = 10000;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The job's shared state: the ledger of every block's outcome and the live counters progress
// reports read.
struct JobState {
  JobState(uint64_t block_size, size_t max_failures)
      : ledger(block_size, std::max<size_t>(max_failures, kMinReasonsKept)) {}

  LoadLedger ledger;
  std::atomic<uint64_t> dirs{0};  // folders listed whole so far
  std::atomic<uint64_t> files_done{0};
  std::atomic<uint64_t> loaded_bytes{0};
  std::atomic<uint64_t> cached_bytes{0};
  std::atomic<uint64_t> failed_bytes{0};
  std::atomic<bool> cancelled{false};
};

// A run of blocks, possibly spanning files, loaded with one sink call.
struct Batch {
  std::vector<BlockSpec> specs;
  std::vector<LoadLedger::Slot> slots;  // per spec: its file's
  // Per spec: its file's blocks without an outcome in this pass.
  std::vector<std::shared_ptr<std::atomic<uint64_t>>> remaining;
  uint64_t bytes = 0;
};

// Runs batches on a pool, at most `parallel` at a time, calling `tick` from the calling thread
// about every `interval` while it waits (and when TickIfDue finds it due).
class BatchRunner {
 public:
  BatchRunner(size_t parallel, std::chrono::milliseconds interval, std::function<void()> tick)
      : pool_(parallel), limit_(parallel * 2), interval_(interval), tick_(std::move(tick)) {}

  void Run(std::function<void()> task) EXCLUDES(mu_) {
    {
      MutexLock lock(&mu_);
      while (in_flight_ >= limit_) WaitOrTick();
      ++in_flight_;
    }
    pool_.Post([this, task = std::move(task)] {
      task();
      MutexLock done(&mu_);
      --in_flight_;
      cv_.SignalAll();
    });
  }

  void Drain() EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    while (in_flight_ > 0) WaitOrTick();
  }

  void TickIfDue() EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    if (Clock::now() >= next_tick_) Tick();
  }

  Clock::time_point next_tick() const EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return next_tick_;
  }

 private:
  // Waits for a batch to finish, or runs the tick (without the lock) once it is due.
  void WaitOrTick() REQUIRES(mu_) {
    if (!cv_.WaitUntil(&mu_, next_tick_)) Tick();
  }

  void Tick() REQUIRES(mu_) {
    next_tick_ = Clock::time_point::max();  // no other tick meanwhile
    mu_.Unlock();
    tick_();
    mu_.Lock();
    next_tick_ = Clock::now() + interval_;
  }

  ThreadPool pool_;
  const size_t limit_;
  const std::chrono::milliseconds interval_;
  std::function<void()> tick_;
  mutable Mutex mu_;
  CondVar cv_;
  size_t in_flight_ GUARDED_BY(mu_) = 0;
  Clock::time_point next_tick_ GUARDED_BY(mu_) = Clock::now();
};

// One pass over blocks: the blocks of the files added, gathered into batches, each loaded (or
// checked) through the sink on the runner; the outcomes go to the ledger. The caller drains the
// runner after Finish.
class BlockPass {
 public:
  BlockPass(Namespace& ns, JobState& job, BlockSink& sink, const LoadOptions& options,
            BatchRunner& runner, bool check_only, bool later_pass)
      : ns_(ns),
        job_(job),
        sink_(sink),
        options_(options),
        runner_(runner),
        check_only_(check_only),
        later_pass_(later_pass) {}

  void Add(const ObjectSpec& object, LoadLedger::Slot slot) {
    if (object.blocks() == 0) {
      if (!check_only_) job_.files_done++;
      return;
    }
    auto remaining = std::make_shared<std::atomic<uint64_t>>(object.blocks());
    for (uint64_t b = 0; b < object.blocks(); ++b) {
      if (job_.cancelled.load()) return;
      BlockSpec spec{object, b};
      batch_->bytes += spec.length();
      batch_->specs.push_back(std::move(spec));
      batch_->slots.push_back(slot);
      batch_->remaining.push_back(remaining);
      if (batch_->specs.size() >= options_.batch_blocks || batch_->bytes >= options_.batch_bytes) {
        Submit();
      }
    }
  }

  void Finish() {
    if (!batch_->specs.empty()) Submit();
  }

 private:
  void Submit() {
    runner_.Run([this, batch = std::move(batch_)] { Complete(*batch); });
    batch_ = std::make_shared<Batch>();
  }

  // On the pool: the sink's answer for one batch.
  void Complete(const Batch& batch) {
    if (job_.cancelled.load()) return;
    std::vector<BlockOutcome> got = sink_.Load(ns_.name, batch.specs, check_only_);
    for (size_t i = 0; i < batch.specs.size(); ++i) {
      BlockOutcome outcome = i < got.size()
                                 ? std::move(got[i])
                                 : BlockOutcome{BlockState::kFailed, "no answer for this block"};
      if (outcome.state == BlockState::kMissing) {
        outcome = {BlockState::kFailed,
                   check_only_ ? "evicted before the load ended (is the cache smaller than what "
                                 "was loaded?)"
                               : "the cache did not keep the block"};
      }
      job_.ledger.Record(batch.slots[i], batch.specs[i].index, outcome, later_pass_);
      if (check_only_) continue;  // the final check: progress already counted this block
      uint64_t length = batch.specs[i].length();
      switch (outcome.state) {
        case BlockState::kLoaded:
          job_.loaded_bytes += length;
          break;
        case BlockState::kAlreadyCached:
          job_.cached_bytes += length;
          break;
        default:
          job_.failed_bytes += length;
      }
      if (batch.remaining[i]->fetch_sub(1) == 1) job_.files_done++;
    }
  }

  Namespace& ns_;
  JobState& job_;
  BlockSink& sink_;
  const LoadOptions& options_;
  BatchRunner& runner_;
  const bool check_only_;
  const bool later_pass_;
  std::shared_ptr<Batch> batch_ = std::make_shared<Batch>();
};

// A later pass over every block the first one saw, from the ledger (no listing).
void RunLaterPass(Namespace& ns, JobState& job, BlockSink& sink, const LoadOptions& options,
                  BatchRunner& runner, bool check_only) {
  BlockPass pass(ns, job, sink, options, runner, check_only, /*later_pass=*/true);
  job.ledger.ForEachFile(
      [&](const std::string& path, const DirEntry& entry, LoadLedger::Slot slot) {
        if (job.cancelled.load()) return false;
        pass.Add(ObjectSpecOf(ns, path, entry), slot);
        return true;
      });
  pass.Finish();
  runner.Drain();
}

// Hands the walk's files to the loader through a bounded queue, and its folders to the ledger.
class QueueVisitor : public TreeVisitor {
 public:
  QueueVisitor(BoundedQueue<TreeFile>& queue, JobState& job) : queue_(queue), job_(job) {}

  Status OnFile(TreeFile file) override {
    if (!queue_.Push(std::move(file))) return Status::Unavailable("the load was cancelled");
    return Status::Ok();
  }

  void OnFolder(uint64_t folder, const std::string& dir,
                std::shared_ptr<const DirListing> listing) override {
    job_.dirs++;
    job_.ledger.AddFolder(folder, dir, std::move(listing));
  }

 private:
  BoundedQueue<TreeFile>& queue_;
  JobState& job_;
};

// The first pass: the walk on a thread of its own, each file loaded as it comes (with
// metadata_only, counted only). Returns the walk's result.
Result<TreeWalkStats> LoadAsListed(Namespace& ns, const std::string& path, JobState& job,
                                   BlockSink& sink, const LoadOptions& options, BatchRunner& runner,
                                   LoadProgress* p) {
  BoundedQueue<TreeFile> queue(std::max<size_t>(options.queue_files, 1));
  QueueVisitor visitor(queue, job);
  Result<TreeWalkStats> walked = Status::Internal("not walked");
  std::thread lister([&] {
    walked = WalkTree(*ns.meta, path, options.recursive, /*pin=*/true, visitor);
    queue.Close();
  });
  BlockPass pass(ns, job, sink, options, runner, /*check_only=*/false, /*later_pass=*/false);
  TreeFile file;
  for (;;) {
    auto popped = queue.Pop(&file, runner.next_tick());
    if (popped == BoundedQueue<TreeFile>::Popped::kClosed) break;
    if (popped == BoundedQueue<TreeFile>::Popped::kItem) {
      p->total.files++;
      p->total.bytes += file.entry.size;
      if (!options.metadata_only) {
        pass.Add(ObjectSpecOf(ns, file.path, file.entry), job.ledger.AddFile(file));
      }
    }
    runner.TickIfDue();
    if (job.cancelled.load()) {
      queue.Close();  // the walk stops at its next file
      break;
    }
  }
  pass.Finish();
  lister.join();
  runner.Drain();
  return walked;
}

// Frees the walk's files through the sink, kFreeBatch objects a call.
class FreeVisitor : public TreeVisitor {
 public:
  FreeVisitor(Namespace& ns, BlockSink& sink) : ns_(ns), sink_(sink) {}

  Status OnFile(TreeFile file) override {
    batch_.push_back(ObjectSpecOf(ns_, file.path, file.entry));
    ++result_.files;
    return batch_.size() >= kFreeBatch ? Flush() : Status::Ok();
  }

  Status Flush() {
    if (batch_.empty()) return Status::Ok();
    LC_ASSIGN_OR_RETURN(uint64_t freed, sink_.Free(ns_.name, batch_));
    result_.blocks_freed += freed;
    batch_.clear();
    return Status::Ok();
  }

  const FreeResult& result() const { return result_; }

 private:
  Namespace& ns_;
  BlockSink& sink_;
  std::vector<ObjectSpec> batch_;
  FreeResult result_;
};

}  // namespace

uint64_t BlockSpec::length() const {
  uint64_t start = index * object.block_size;
  return start >= object.size ? 0 : std::min(object.block_size, object.size - start);
}

ObjectSpec ObjectSpecOf(const Namespace& ns, const std::string& path, const DirEntry& entry) {
  return ObjectSpec{ns.meta->ObjectKey(path), entry.etag, entry.size, ns.config.block_size};
}

Result<LoadProgress> RunLoad(Namespace& ns, const std::string& path, BlockSink& sink,
                             const LoadOptions& options,
                             const std::function<bool(const LoadProgress&)>& progress) {
  Clock::time_point start = Clock::now();
  JobState job(ns.config.block_size, options.max_failures);
  LoadProgress p;
  auto report = [&](bool done) {
    if (!done) {
      if (!p.listed) p.dirs = job.dirs.load();
      p.loaded.bytes = job.loaded_bytes.load();
      p.already_cached.bytes = job.cached_bytes.load();
      p.failed.bytes = job.failed_bytes.load();
      p.files_done = job.files_done.load();
    }
    p.seconds = SecondsSince(start);
    p.done = done;
    if (!progress(p)) job.cancelled = true;
  };
  {
    BatchRunner runner(options.parallel_batches, options.progress_interval, [&] { report(false); });
    Result<TreeWalkStats> walked = LoadAsListed(ns, path, job, sink, options, runner, &p);
    if (!walked.ok() && !job.cancelled.load()) return walked.status();
    if (walked.ok()) {
      p.listed = true;
      p.dirs = walked->dirs;
    }
    if (options.metadata_only) {
      p.complete = !job.cancelled.load();
      report(true);
      return p;
    }
    // Blocks on a worker that failed are gone from the cluster: check every block again (a few
    // rounds, in case another worker fails meanwhile).
    for (int round = 0; round < 3 && !job.cancelled.load() && sink.TakeLost(); ++round) {
      job.loaded_bytes = job.cached_bytes = job.failed_bytes = 0;
      job.files_done = 0;
      RunLaterPass(ns, job, sink, options, runner, /*check_only=*/false);
    }
    // The report says what the cache holds now: a block loaded early and evicted by a later one
    // (a cache smaller than the data) is not cached.
    if (!job.cancelled.load()) RunLaterPass(ns, job, sink, options, runner, /*check_only=*/true);
  }
  job.ledger.Tally(options.max_failures, &p);
  p.files_done = p.loaded.files + p.already_cached.files + p.failed.files;
  p.complete = !job.cancelled.load();
  p.seconds = SecondsSince(start);
  p.done = true;
  progress(p);
  return p;
}

Result<PathStatus> StatPath(Namespace& ns, const std::string& path, BlockSink& sink) {
  PathStatus out;
  if (path.empty()) {
    out.entry.is_dir = true;
    out.key = ns.prefix;
    return out;
  }
  LC_ASSIGN_OR_RETURN(out.entry, ns.meta->Stat(path));
  out.key = ns.meta->ObjectKey(path) + (out.entry.is_dir ? "/" : "");
  if (out.entry.is_dir) return out;
  ObjectSpec object = ObjectSpecOf(ns, path, out.entry);
  out.block_size = object.block_size;
  out.blocks_total = object.blocks();
  std::vector<BlockSpec> blocks;
  for (uint64_t b = 0; b < out.blocks_total; ++b) blocks.push_back({object, b});
  std::vector<BlockOutcome> got = sink.Load(ns.name, blocks, /*check_only=*/true);
  for (size_t b = 0; b < got.size() && b < blocks.size(); ++b) {
    if (got[b].state != BlockState::kAlreadyCached) continue;
    ++out.blocks_cached;
    out.cached_bytes += blocks[b].length();
  }
  return out;
}

Result<FreeResult> FreePath(Namespace& ns, const std::string& path, bool recursive,
                            BlockSink& sink) {
  FreeVisitor visitor(ns, sink);
  LC_ASSIGN_OR_RETURN(TreeWalkStats walked,
                      WalkTree(*ns.meta, path, recursive, /*pin=*/false, visitor));
  LC_RETURN_IF_ERROR(visitor.Flush());
  if (walked.is_dir) ns.meta->Unpin(path);
  return visitor.result();
}

}  // namespace lakecache
