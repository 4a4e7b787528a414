#include "admin/stats_metrics.h"

#include <string>

namespace lakecache::rpc {
namespace {

// A tier's labels: "disk:/var/cache/lakecache" -> tier="disk", path="/var/cache/lakecache".
metrics::Labels TierLabels(const std::string& tier) {
  size_t colon = tier.find(':');
  if (colon == std::string::npos) return {{"tier", tier}};
  return {{"tier", tier.substr(0, colon)}, {"path", tier.substr(colon + 1)}};
}

metrics::Labels With(metrics::Labels labels, const char* name, const char* value) {
  labels.emplace_back(name, value);
  return labels;
}

double D(uint64_t v) { return static_cast<double>(v); }

// The fetch latency histogram from the log2 microsecond buckets, at every other power of two
// from 128 us to 32 s.
void AddFetchLatency(const WorkerStats& stats, metrics::Sink& sink) {
  std::vector<double> bounds;
  std::vector<uint64_t> cumulative;
  uint64_t below = 0;  // fetches in buckets [0, i]
  uint64_t count = 0;
  for (int i = 0; i < stats.fetch_latency_us_log2_size(); ++i) {
    below += stats.fetch_latency_us_log2(i);
    // Bucket i holds [2^i, 2^(i+1)) us: after it, `below` counts fetches < 2^(i+1) us.
    int exponent = i + 1;
    if (exponent >= 7 && exponent <= 25 && exponent % 2 == 1) {
      bounds.push_back(static_cast<double>(uint64_t{1} << exponent) / 1e6);
      cumulative.push_back(below);
    }
  }
  count = below;
  sink.Histogram("lakecache_cache_fetch_duration_seconds",
                 "Block fetches from the source (object store, or a worker for a mount): duration",
                 {}, bounds, cumulative, count, D(stats.fetch_latency_us_total()) / 1e6);
}

void AddReplicaMetrics(const WorkerStats& stats, metrics::Sink& sink) {
  sink.Gauge("lakecache_worker_replica_blocks",
             "Blocks a worker keeps as replicas for the mounts of its host", {},
             D(stats.replica_blocks()));
  sink.Gauge("lakecache_worker_replica_bytes", "Bytes of the replicas a worker keeps", {},
             D(stats.replica_bytes()));
  sink.Counter("lakecache_worker_replicas_fetched_total",
               "Replicas a worker got from other workers", {}, D(stats.replicas_fetched()));
  sink.Counter("lakecache_worker_replicas_erased_total",
               "Replicas a worker erased to stay in their share or make room for its own blocks",
               {}, D(stats.replicas_erased()));
  const char* replica_help =
      "Replica reads by outcome: redirected (the owner named another holder), holder_missed (it "
      "did not have the block: the owner was asked again), digest_mismatch (bytes refused)";
  sink.Counter("lakecache_worker_replica_reads_total", replica_help, {{"outcome", "redirected"}},
               D(stats.replica_redirects()));
  sink.Counter("lakecache_worker_replica_reads_total", replica_help, {{"outcome", "holder_missed"}},
               D(stats.replica_holder_misses()));
  sink.Counter("lakecache_worker_replica_reads_total", replica_help,
               {{"outcome", "digest_mismatch"}}, D(stats.replica_digest_mismatches()));
  sink.Counter("lakecache_worker_replica_silent_peers_total",
               "Peers a worker found silent (no answer to a ping) while a replica read waited on "
               "them: their reads went to the object store",
               {}, D(stats.replica_silent_peers()));
  sink.Gauge("lakecache_worker_holder_blocks",
             "Blocks a worker owns whose replica holders it knows", {}, D(stats.holder_blocks()));
}

void AddWorkerMetrics(const WorkerStats& stats, metrics::Sink& sink) {
  sink.Counter("lakecache_worker_served_blocks_total",
               "Block reads a worker answered (gRPC and the bulk data path)", {},
               D(stats.blocks_served()));
  sink.Counter("lakecache_worker_served_bytes_total", "Bytes a worker served to clients", {},
               D(stats.bytes_served()));
  sink.Counter("lakecache_worker_located_blocks_total",
               "Blocks a worker told a co-located mount the cache file of", {},
               D(stats.blocks_located()));
  sink.Gauge("lakecache_worker_shm_sessions", "Mounts on this host mapping the worker's memory", {},
             D(stats.shm_sessions()));
  sink.Gauge("lakecache_worker_shm_published_bytes", "Bytes of blocks published in shared memory",
             {}, D(stats.shm_published_bytes()));
  sink.Gauge("lakecache_worker_shm_deferred_bytes",
             "Bytes let go of that a co-located mount still reads", {},
             D(stats.shm_deferred_bytes()));
  AddReplicaMetrics(stats, sink);
}

}  // namespace

void AddStatsMetrics(const WorkerStats& stats, bool worker, metrics::Sink& sink) {
  for (const TierStatsProto& t : stats.tiers()) {
    metrics::Labels labels = TierLabels(t.tier());
    sink.Counter("lakecache_cache_hits_total", "Block lookups a tier answered", labels,
                 D(t.hits()));
    sink.Counter("lakecache_cache_misses_total", "Block lookups a tier did not hold", labels,
                 D(t.misses()));
    sink.Counter("lakecache_cache_hit_bytes_total", "Bytes readers got from a tier", labels,
                 D(t.hit_bytes()));
    sink.Counter("lakecache_cache_inserts_total", "Blocks a tier stored", labels, D(t.inserts()));
    sink.Counter("lakecache_cache_rejected_total", "Blocks a tier's policy declined to admit",
                 labels, D(t.rejected()));
    sink.Counter("lakecache_cache_evictions_total",
                 "Blocks a tier removed, by reason (capacity: room for others; corrupt: failed "
                 "its checksum)",
                 With(labels, "reason", "capacity"), D(t.evictions()));
    sink.Counter("lakecache_cache_evictions_total", "", With(labels, "reason", "corrupt"),
                 D(t.corrupt_blocks()));
    sink.Counter("lakecache_cache_checksum_failures_total",
                 "Cached blocks whose checksum or header did not match (removed, read again)",
                 labels, D(t.corrupt_blocks()));
    sink.Counter("lakecache_cache_write_errors_total",
                 "Blocks a tier could not write (disk full, I/O errors)", labels,
                 D(t.write_errors()));
    sink.Gauge("lakecache_cache_used_bytes", "Bytes a tier holds", labels, D(t.used_bytes()));
    sink.Gauge("lakecache_cache_capacity_bytes", "Bytes a tier may hold", labels,
               D(t.capacity_bytes()));
    sink.Gauge("lakecache_cache_blocks", "Blocks a tier holds", labels, D(t.blocks()));
  }
  sink.Counter("lakecache_cache_fetches_total", "Blocks fetched from the source", {},
               D(stats.fetches()));
  sink.Counter("lakecache_cache_fetch_errors_total", "Block fetches that failed", {},
               D(stats.fetch_errors()));
  sink.Counter("lakecache_cache_fetched_bytes_total", "Bytes of blocks fetched from the source", {},
               D(stats.fetched_bytes()));
  AddFetchLatency(stats, sink);
  const char* prefetch_help =
      "Read-ahead blocks by outcome: used (a reader took it), dropped (unread), refused (no "
      "memory budget)";
  sink.Counter("lakecache_prefetch_blocks_total", prefetch_help, {{"outcome", "used"}},
               D(stats.prefetch_used()));
  sink.Counter("lakecache_prefetch_blocks_total", prefetch_help, {{"outcome", "dropped"}},
               D(stats.prefetch_dropped()));
  sink.Counter("lakecache_prefetch_blocks_total", prefetch_help, {{"outcome", "refused"}},
               D(stats.prefetch_refused()));
  if (worker) AddWorkerMetrics(stats, sink);
}

}  // namespace lakecache::rpc
