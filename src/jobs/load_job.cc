#include "jobs/load_job.h"

#include <algorithm>
#include <atomic>
#include <memory>

#include "common/mutex.h"
#include "common/thread_pool.h"
#include "jobs/tree_walk.h"

namespace lakecache {
namespace {

constexpr size_t kFreeBatch = 1000;  // objects per Free call

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The job's shared state: one slot per block (written by the batch that loads it) and the live
// counters progress reports read.
struct JobState {
  std::vector<TreeFile> files;
  std::vector<ObjectSpec> objects;    // per file
  std::vector<uint64_t> first_block;  // per file: index of its first block in `blocks`
  std::vector<BlockOutcome> blocks;   // per block
  std::unique_ptr<std::atomic<uint64_t>[]> remaining;  // per file: blocks without an outcome
  std::atomic<uint64_t> files_done{0};
  std::atomic<uint64_t> loaded_bytes{0};
  std::atomic<uint64_t> cached_bytes{0};
  std::atomic<uint64_t> failed_bytes{0};
  std::atomic<bool> cancelled{false};

  uint64_t BlockCount(size_t file) const { return objects[file].blocks(); }
};

// A run of blocks, possibly spanning files, loaded with one sink call.
struct Batch {
  std::vector<BlockSpec> specs;
  std::vector<uint64_t> slots;  // index into JobState::blocks, per spec
  std::vector<uint64_t> files;  // index into JobState::files, per spec
  uint64_t bytes = 0;
};

// Runs batches on a pool, at most `parallel` at a time, calling `tick` from the calling thread
// about every `interval` while it waits.
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

 private:
  // Waits for a batch to finish, or runs the tick (without the lock) once it is due.
  void WaitOrTick() REQUIRES(mu_) {
    if (!cv_.WaitUntil(&mu_, next_tick_)) {
      mu_.Unlock();
      tick_();
      mu_.Lock();
      next_tick_ = Clock::now() + interval_;
    }
  }

  ThreadPool pool_;
  const size_t limit_;
  const std::chrono::milliseconds interval_;
  std::function<void()> tick_;
  Mutex mu_;
  CondVar cv_;
  size_t in_flight_ GUARDED_BY(mu_) = 0;
  Clock::time_point next_tick_ GUARDED_BY(mu_) = Clock::now();
};

// Loads (or checks) the blocks in `slots` through the sink, batch by batch.
void LoadBlocks(Namespace& ns, JobState& job, BlockSink& sink, const LoadOptions& options,
                const std::vector<uint64_t>& files, bool check_only, BatchRunner& runner) {
  auto submit = [&](std::shared_ptr<Batch> batch) {
    runner.Run([&ns, &job, &sink, batch, check_only] {
      if (job.cancelled.load()) return;
      std::vector<BlockOutcome> got = sink.Load(ns.name, batch->specs, check_only);
      for (size_t i = 0; i < batch->specs.size(); ++i) {
        BlockOutcome outcome = i < got.size()
                                   ? std::move(got[i])
                                   : BlockOutcome{BlockState::kFailed, "no answer for this block"};
        if (outcome.state == BlockState::kMissing) {
          outcome = {BlockState::kFailed,
                     check_only ? "evicted before the load ended (is the cache smaller than what "
                                  "was loaded?)"
                                : "the cache did not keep the block"};
        }
        job.blocks[batch->slots[i]] = std::move(outcome);
        if (check_only) continue;  // the final check: progress already counted this block
        uint64_t length = batch->specs[i].length();
        switch (job.blocks[batch->slots[i]].state) {
          case BlockState::kLoaded:
            job.loaded_bytes += length;
            break;
          case BlockState::kAlreadyCached:
            job.cached_bytes += length;
            break;
          default:
            job.failed_bytes += length;
        }
        if (job.remaining[batch->files[i]].fetch_sub(1) == 1) job.files_done++;
      }
    });
  };
  auto batch = std::make_shared<Batch>();
  for (uint64_t file : files) {
    const ObjectSpec& object = job.objects[file];
    for (uint64_t b = 0; b < object.blocks(); ++b) {
      if (job.cancelled.load()) return;
      BlockSpec spec{object, b};
      batch->bytes += spec.length();
      batch->specs.push_back(std::move(spec));
      batch->slots.push_back(job.first_block[file] + b);
      batch->files.push_back(file);
      if (batch->specs.size() >= options.batch_blocks || batch->bytes >= options.batch_bytes) {
        submit(std::move(batch));
        batch = std::make_shared<Batch>();
      }
    }
  }
  if (!batch->specs.empty()) submit(std::move(batch));
}

// Files and bytes per outcome, from the blocks' final states.
void Tally(const JobState& job, const LoadOptions& options, LoadProgress* p) {
  p->loaded = p->already_cached = p->failed = {};
  p->failures.clear();
  for (size_t f = 0; f < job.files.size(); ++f) {
    bool loaded = false;
    const std::string* error = nullptr;
    bool missing = false;
    for (uint64_t b = 0; b < job.BlockCount(f); ++b) {
      const BlockOutcome& o = job.blocks[job.first_block[f] + b];
      uint64_t length = BlockSpec{job.objects[f], b}.length();
      switch (o.state) {
        case BlockState::kLoaded:
          loaded = true;
          p->loaded.bytes += length;
          break;
        case BlockState::kAlreadyCached:
          p->already_cached.bytes += length;
          break;
        case BlockState::kFailed:
          if (error == nullptr) error = &o.error;
          p->failed.bytes += length;
          break;
        case BlockState::kMissing:
          missing = true;
          break;  // not reached (cancelled)
      }
    }
    if (error != nullptr) {
      ++p->failed.files;
      if (p->failures.size() < options.max_failures) {
        p->failures.push_back({job.files[f].path, *error});
      }
    } else if (missing) {
      continue;
    } else if (loaded) {
      ++p->loaded.files;
    } else {
      ++p->already_cached.files;
    }
  }
}

// After a second pass over the blocks: one found cached keeps what the earlier pass said of it
// (loaded by this job, or cached before; loaded, if it had failed then); one that failed both
// times keeps its first reason.
void KeepEarlierOutcomes(const std::vector<BlockOutcome>& before, std::vector<BlockOutcome>& now) {
  for (size_t b = 0; b < before.size(); ++b) {
    bool failed_before = before[b].state == BlockState::kFailed;
    if (now[b].state == BlockState::kAlreadyCached) {
      now[b] = failed_before ? BlockOutcome{BlockState::kLoaded, ""} : before[b];
    } else if (now[b].state == BlockState::kFailed && failed_before) {
      now[b] = before[b];
    }
  }
}

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
  LC_ASSIGN_OR_RETURN(Tree tree, WalkTree(*ns.meta, path, options.recursive, /*pin=*/true));
  auto job = std::make_unique<JobState>();
  LoadProgress p;
  p.dirs = tree.dirs;
  p.listed = true;
  job->files = std::move(tree.files);
  uint64_t total_blocks = 0;
  for (const TreeFile& file : job->files) {
    job->objects.push_back(ObjectSpecOf(ns, file.path, file.entry));
    job->first_block.push_back(total_blocks);
    total_blocks += job->objects.back().blocks();
    p.total.files++;
    p.total.bytes += file.entry.size;
  }
  auto report = [&](bool done) {
    if (!done) {
      p.loaded.bytes = job->loaded_bytes.load();
      p.already_cached.bytes = job->cached_bytes.load();
      p.failed.bytes = job->failed_bytes.load();
      p.files_done = job->files_done.load();
    }
    p.seconds = SecondsSince(start);
    p.done = done;
    if (!progress(p)) job->cancelled = true;
  };
  if (options.metadata_only) {
    p.complete = true;
    report(true);
    return p;
  }
  report(false);
  job->blocks.resize(total_blocks);
  std::vector<uint64_t> all(job->files.size());
  for (uint64_t f = 0; f < all.size(); ++f) all[f] = f;
  auto reset_files = [&] {
    job->files_done = 0;
    for (uint64_t f = 0; f < all.size(); ++f) {
      job->remaining[f] = job->BlockCount(f);
      if (job->BlockCount(f) == 0) job->files_done++;
    }
  };
  job->remaining = std::make_unique<std::atomic<uint64_t>[]>(all.size());
  reset_files();
  {
    BatchRunner runner(options.parallel_batches, options.progress_interval, [&] { report(false); });
    LoadBlocks(ns, *job, sink, options, all, /*check_only=*/false, runner);
    runner.Drain();
    // Blocks on a worker that failed are gone from the cluster: check every block again (a few
    // rounds, in case another worker fails meanwhile).
    for (int round = 0; round < 3 && !job->cancelled.load() && sink.TakeLost(); ++round) {
      std::vector<BlockOutcome> before = job->blocks;
      job->loaded_bytes = job->cached_bytes = job->failed_bytes = 0;
      reset_files();
      LoadBlocks(ns, *job, sink, options, all, /*check_only=*/false, runner);
      runner.Drain();
      KeepEarlierOutcomes(before, job->blocks);
    }
    // The report says what the cache holds now: a block loaded early and evicted by a later one
    // (a cache smaller than the data) is not cached.
    if (!job->cancelled.load()) {
      std::vector<BlockOutcome> before = job->blocks;
      LoadBlocks(ns, *job, sink, options, all, /*check_only=*/true, runner);
      runner.Drain();
      KeepEarlierOutcomes(before, job->blocks);
    }
  }
  Tally(*job, options, &p);
  p.files_done = p.loaded.files + p.already_cached.files + p.failed.files;
  p.complete = !job->cancelled.load();
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
  LC_ASSIGN_OR_RETURN(Tree tree, WalkTree(*ns.meta, path, recursive, /*pin=*/false));
  FreeResult out;
  std::vector<ObjectSpec> batch;
  auto flush = [&]() -> Status {
    if (batch.empty()) return Status::Ok();
    LC_ASSIGN_OR_RETURN(uint64_t freed, sink.Free(ns.name, batch));
    out.blocks_freed += freed;
    batch.clear();
    return Status::Ok();
  };
  for (const TreeFile& file : tree.files) {
    batch.push_back(ObjectSpecOf(ns, file.path, file.entry));
    ++out.files;
    if (batch.size() >= kFreeBatch) LC_RETURN_IF_ERROR(flush());
  }
  LC_RETURN_IF_ERROR(flush());
  if (tree.is_dir) ns.meta->Unpin(path);
  return out;
}

}  // namespace lakecache
