#include "admin/load_jobs.h"

#include <chrono>

namespace lakecache {

LoadJobTable::Running LoadJobTable::Begin(const std::string& ns, const std::string& path) {
  Job job;
  job.ns = ns;
  job.path = path;
  job.started_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  MutexLock lock(&mu_);
  ++started_;
  running_.push_back(std::move(job));
  return Running(this, std::prev(running_.end()));
}

void LoadJobTable::Running::Update(const LoadProgress& progress) {
  MutexLock lock(&table_->mu_);
  it_->progress = progress;
  it_->progress.failures.clear();
}

LoadJobTable::Running::~Running() {
  MutexLock lock(&table_->mu_);
  table_->ended_bytes_ += it_->progress.loaded.bytes;
  table_->ended_files_ += it_->progress.loaded.files;
  table_->running_.erase(it_);
}

std::vector<LoadJobTable::Job> LoadJobTable::Snapshot() const {
  MutexLock lock(&mu_);
  return {running_.begin(), running_.end()};
}

void LoadJobTable::AddMetrics(metrics::Sink& sink) const {
  MutexLock lock(&mu_);
  uint64_t bytes = ended_bytes_, files = ended_files_;
  for (const Job& job : running_) {
    bytes += job.progress.loaded.bytes;
    files += job.progress.loaded.files;
  }
  sink.Gauge("lakecache_load_jobs_running", "Loads (lakecache load) running now", {},
             static_cast<double>(running_.size()));
  sink.Counter("lakecache_load_jobs_total", "Loads started", {}, static_cast<double>(started_));
  sink.Counter("lakecache_load_bytes_total", "Bytes fetched into the cache by loads", {},
               static_cast<double>(bytes));
  sink.Counter("lakecache_load_files_total", "Files a load fetched blocks of", {},
               static_cast<double>(files));
}

}  // namespace lakecache
