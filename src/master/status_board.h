// The master's status page (served on --metrics-listen beside /metrics): the workers with their
// capacity, use, hit ratio and state; the namespaces; the loads running with their progress; and
// the cluster's throughput and hit ratio over the last minutes, as plots.
//
// A sampler thread asks every live worker for its Stats (AdminBackend::GetReport, the numbers
// `report` and `cluster status` print) every `interval`, reads what the cluster mounts reported
// with their view fetches (ClientTable), and keeps the last `history` of throughput and hit
// ratio from the differences between samples (a restarted worker's or mount's counters start
// again: its first sample counts nothing). Throughput is what the mounts' readers got (bytes per
// second), or without reporting mounts what the workers served over the network.
//
// A hit ratio, in the plot and in a worker's column alike, is the share of the bytes readers got
// that they did not wait for the object store for: the bytes a worker served over the network
// that its tiers did not hold are the misses. A load's fills are no reader's, so neither hits nor
// misses; a read of a block a load brought in is a hit. The plot divides the misses of an
// interval by what the mounts read in it, reads a mount makes on a worker's host (its shared
// memory, its cache files) included. A worker's column counts what it served since it started;
// those short-circuit reads never reach it and are all hits, so with such readers its share is
// only a lower bound (`hit_ratio_at_least`), exact when it is 1.
//
// The page is one HTML file with its script and styles inline (status_page.html, embedded at build
// time): nothing is loaded from anywhere else.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "admin/admin_service.h"
#include "admin/load_jobs.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "http/http_endpoint.h"
#include "rpc/lakecache.pb.h"

namespace lakecache {

class ClientTable;
class NamespaceTable;
class WorkerRegistry;

struct StatusBoardOptions {
  std::chrono::milliseconds interval{2000};
  std::chrono::seconds history{600};
  std::string address;  // the master's, as it announces it
  std::string version;
  bool insecure = false;
  const SteadyClock* clock = SteadyClock::Real();  // the sampler's interval and the uptime
};

class StatusBoard {
 public:
  // Starts sampling. `admin` gives the workers' Stats (GetReport). Everything passed must outlive
  // the board.
  StatusBoard(AdminBackend* admin, const NamespaceTable* namespaces, WorkerRegistry* registry,
              const ClientTable* clients, const LoadJobTable* loads, StatusBoardOptions options);
  ~StatusBoard();  // stops sampling
  StatusBoard(const StatusBoard&) = delete;
  StatusBoard& operator=(const StatusBoard&) = delete;

  // "/" and "/status" (the page), "/status.json" (what it shows, as JSON).
  std::map<std::string, HttpPage> Pages();

  // The status as JSON text (the page's data).
  std::string StatusJson() const;
  // lakecache_master_workers{state}, lakecache_master_namespaces.
  void AddMetrics(metrics::Sink& sink) const;

  // Takes a sample now, as the sampler does every `interval` (a test steps the board with it).
  void Sample() EXCLUDES(sample_mu_, mu_);

 private:
  struct Point {
    int64_t t_ms = 0;
    double served_per_s = 0;
    double fetched_per_s = 0;
    double hit_ratio = -1;  // < 0: nothing read in the interval
  };
  // A worker's counters at the last sample, by id and incarnation.
  struct Counters {
    int64_t start_time_ms = 0;
    uint64_t served = 0, hit = 0, fetched = 0;
  };
  // A mount's, by its report's id.
  struct ClientCounters {
    uint64_t read = 0, local = 0, fetched = 0;
  };

  // Samples every `interval` until the destructor says stop.
  void Loop() EXCLUDES(stop_mu_);

  AdminBackend* admin_;
  const NamespaceTable* namespaces_;
  WorkerRegistry* registry_;
  const ClientTable* clients_;
  const LoadJobTable* loads_;
  const StatusBoardOptions options_;
  const std::chrono::steady_clock::time_point started_;

  // One sample at a time: the counters a sample keeps are the ones the next one subtracts.
  Mutex sample_mu_ ACQUIRED_BEFORE(mu_);
  mutable Mutex mu_;
  rpc::Report last_ GUARDED_BY(mu_);
  std::map<std::string, Counters> counters_ GUARDED_BY(mu_);
  std::map<std::string, ClientCounters> client_counters_ GUARDED_BY(mu_);
  std::vector<rpc::ClientReport> last_clients_ GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point last_at_ GUARDED_BY(mu_);
  std::deque<Point> points_ GUARDED_BY(mu_);

  Mutex stop_mu_;
  CondVar stop_cv_;
  bool stopping_ GUARDED_BY(stop_mu_) = false;
  std::thread sampler_;  // last: stopped first
};

}  // namespace lakecache
