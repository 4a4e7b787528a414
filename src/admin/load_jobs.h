// The loads running in this process (the master's for a cluster, a mount's for itself), as the
// status page lists them and the metrics count them:
//   lakecache_load_jobs_running        gauge
//   lakecache_load_jobs_total          loads started
//   lakecache_load_bytes_total         bytes fetched by loads (running ones included, so it moves
//                                      while a load runs)
//   lakecache_load_files_total         files a load fetched
// Thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "common/mutex.h"
#include "jobs/load_job.h"

namespace lakecache {

class LoadJobTable {
 public:
  struct Job {
    std::string ns;
    std::string path;
    int64_t started_ms = 0;  // Unix ms
    LoadProgress progress;   // the last one reported (failures not kept)
  };

  // A running load: Update as it goes; destroyed when it ends (done, failed or cancelled).
  class Running {
   public:
    Running(const Running&) = delete;
    Running& operator=(const Running&) = delete;
    ~Running();
    void Update(const LoadProgress& progress);

   private:
    friend class LoadJobTable;
    Running(LoadJobTable* table, std::list<Job>::iterator it) : table_(table), it_(it) {}
    LoadJobTable* table_;
    std::list<Job>::iterator it_;
  };

  Running Begin(const std::string& ns, const std::string& path);
  std::vector<Job> Snapshot() const;
  void AddMetrics(metrics::Sink& sink) const;

 private:
  mutable Mutex mu_;
  std::list<Job> running_ GUARDED_BY(mu_);
  uint64_t started_ GUARDED_BY(mu_) = 0;
  uint64_t ended_bytes_ GUARDED_BY(mu_) = 0;  // loaded bytes of loads that ended
  uint64_t ended_files_ GUARDED_BY(mu_) = 0;
};

}  // namespace lakecache
