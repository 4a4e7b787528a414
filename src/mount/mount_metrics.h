// A mount's numbers for its metrics registry, read at every scrape: its cache as `report` shows
// it (MountStats: lakecache_cache_*, lakecache_prefetch_*), its uploads, its reads from the
// cluster's workers (cluster mode), and the loads run through its control socket.
#pragma once

#include <string>

#include "admin/load_jobs.h"
#include "cluster_client/cluster_client.h"
#include "common/metrics.h"
#include "fs/file_system.h"
#include "native/native_server.h"
#include "rpc/lakecache.pb.h"

namespace lakecache {

// What a cluster mount tells its master with each view fetch (rpc::ClientReport): `id` (one per
// server process), this host, the mountpoint, and its reads (FileSystem::bytes_read), the bytes
// of the node tiers' hits (a co-located worker's memory or files) and of the blocks it fetched
// from workers.
void FillClientReport(FileSystem& fs, const std::string& id, const std::string& mountpoint,
                      int64_t start_time_ms, rpc::ClientReport* report);

// `client` null: a standalone mount; `loads` null: no control socket; `native` null: no native
// data path.
void AddMountMetrics(FileSystem& fs, const std::string& mountpoint, const ClusterClient* client,
                     const LoadJobTable* loads, const NativeServer* native, metrics::Sink& sink);

}  // namespace lakecache
