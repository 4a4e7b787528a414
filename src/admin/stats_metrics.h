// The cache's numbers as metrics: a WorkerStats message (what `report` and `cluster status`
// print, filled by rpc::FillStats from BlockStore::Stats and the worker's counters) written into
// a metrics::Sink at a scrape, so the three read the same numbers.
#pragma once

#include "common/metrics.h"
#include "rpc/lakecache.pb.h"

namespace lakecache::rpc {

// lakecache_cache_* per tier (labels: tier = memory|disk|node..., path = a disk tier's folder),
// lakecache_cache_fetch*, lakecache_prefetch_blocks_total{outcome}, and the worker's own counters
// (served blocks and bytes, shared memory) when `worker` is true.
void AddStatsMetrics(const WorkerStats& stats, bool worker, metrics::Sink& sink);

}  // namespace lakecache::rpc
