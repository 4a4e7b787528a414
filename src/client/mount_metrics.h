// A mount's numbers for its metrics registry, read at every scrape: its cache as `report` shows
// it (MountStats: lakecache_cache_*, lakecache_prefetch_*), its uploads, its reads from the
// cluster's workers (cluster mode), and the loads run through its control socket.
#pragma once

#include <string>

#include "admin/load_jobs.h"
#include "client/cluster_client.h"
#include "client/file_system.h"
#include "common/metrics.h"

namespace lakecache {

// `client` null: a standalone mount; `loads` null: no control socket.
void AddMountMetrics(FileSystem& fs, const std::string& mountpoint, const ClusterClient* client,
                     const LoadJobTable* loads, metrics::Sink& sink);

}  // namespace lakecache
