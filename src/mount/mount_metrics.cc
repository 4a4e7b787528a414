#include "mount/mount_metrics.h"

#include <unistd.h>

#include "admin/stats_metrics.h"
#include "mount/mount_admin.h"

namespace lakecache {
namespace {

double D(uint64_t v) { return static_cast<double>(v); }

}  // namespace

void FillClientReport(FileSystem& fs, const std::string& id, const std::string& mountpoint,
                      int64_t start_time_ms, rpc::ClientReport* report) {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  report->set_id(id);
  report->set_host(host);
  report->set_mountpoint(mountpoint);
  report->set_start_time_ms(start_time_ms);
  report->set_read_bytes(fs.bytes_read());
  BlockStoreStats stats = fs.blocks().Stats();
  uint64_t local = 0;
  for (const TierStats& t : stats.tiers) {
    if (t.tier.starts_with("node")) local += t.hit_bytes;
  }
  report->set_local_bytes(local);
  report->set_fetched_bytes(stats.fetched_bytes);
}

void AddMountMetrics(FileSystem& fs, const std::string& mountpoint, const ClusterClient* client,
                     const LoadJobTable* loads, const NativeServer* native, metrics::Sink& sink) {
  if (native != nullptr) {
    NativeServer::Stats n = native->stats();
    sink.Gauge("lakecache_native_sessions", "Readers attached to the native data path now", {},
               D(n.sessions));
    sink.Counter("lakecache_native_sessions_total", "Readers that attached to the native data path",
                 {}, D(n.sessions_total));
    sink.Gauge("lakecache_native_held_bytes",
               "Bytes native readers hold (by reference or staged), by how", {{"how", "reference"}},
               D(n.held_bytes - std::min(n.held_bytes, n.staged_bytes)));
    sink.Gauge("lakecache_native_held_bytes",
               "Bytes native readers hold (by reference or staged), by how", {{"how", "staged"}},
               D(n.staged_bytes));
    const char* reads = "Reads of the native data path, by how they were answered";
    sink.Counter("lakecache_native_reads_total", reads, {{"how", "reference"}},
                 D(n.reads_by_reference));
    sink.Counter("lakecache_native_reads_total", reads, {{"how", "copied"}}, D(n.reads_copied));
    sink.Counter("lakecache_native_reads_total", reads, {{"how", "error"}}, D(n.read_errors));
    const char* bytes = "Bytes of the native data path's reads, by how they were answered";
    sink.Counter("lakecache_native_read_bytes_total", bytes, {{"how", "reference"}},
                 D(n.bytes_by_reference));
    sink.Counter("lakecache_native_read_bytes_total", bytes, {{"how", "copied"}},
                 D(n.bytes_copied));
  }
  rpc::AddStatsMetrics(MountStats(fs, mountpoint), /*worker=*/false, sink);
  sink.Gauge("lakecache_mount_held_inodes", "Inodes the kernel holds (looked up, not forgotten)",
             {}, D(fs.held_inodes()));
  sink.Gauge("lakecache_mount_held_inode_bytes", "Memory of the table of inodes the kernel holds",
             {}, D(fs.held_inode_bytes()));
  const UploadCounters& uploads = fs.upload_counters();
  sink.Counter("lakecache_uploads_total", "Files written through the mount and stored", {},
               D(uploads.completed.load(std::memory_order_relaxed) +
                 uploads.puts.load(std::memory_order_relaxed)));
  sink.Counter("lakecache_upload_failures_total",
               "Uploads that failed (the writer got EIO; the old object, if any, is intact)", {},
               D(uploads.failed.load(std::memory_order_relaxed)));
  sink.Counter("lakecache_upload_bytes_total", "Bytes sent in multipart upload parts", {},
               D(uploads.part_bytes.load(std::memory_order_relaxed)));
  if (client != nullptr) {
    const char* help =
        "Blocks read from the cluster's workers, by path: shm (a co-located worker's memory), "
        "file (its cache files), grpc and bulk (over the network), replica (through the worker "
        "of this host, which keeps a replica)";
    sink.Counter("lakecache_client_worker_reads_total", help, {{"path", "shm"}},
                 D(client->local_memory_hits()));
    sink.Counter("lakecache_client_worker_reads_total", help, {{"path", "file"}},
                 D(client->short_circuit_reads()));
    sink.Counter("lakecache_client_worker_reads_total", help, {{"path", "grpc"}},
                 D(client->streamed_reads()));
    sink.Counter("lakecache_client_worker_reads_total", help, {{"path", "bulk"}},
                 D(client->bulk_reads()));
    sink.Counter("lakecache_client_worker_reads_total", help, {{"path", "replica"}},
                 D(client->replica_reads()));
    sink.Counter("lakecache_client_worker_calls_total", "Calls made to workers", {},
                 D(client->worker_calls()));
  }
  if (OrderHints* hints = fs.order_hints()) {
    OrderHints::Counters c = hints->counters();
    const char* help =
        "Files of the readers' announced orders (the order hint), by what became of them";
    sink.Counter("lakecache_order_hint_files_total", help, {{"outcome", "hinted"}},
                 D(c.files_hinted));
    sink.Counter("lakecache_order_hint_files_total", help, {{"outcome", "fetched"}},
                 D(c.files_fetched));
    sink.Counter("lakecache_order_hint_files_total", help, {{"outcome", "read"}}, D(c.files_read));
    sink.Counter("lakecache_order_hint_files_total", help, {{"outcome", "dropped"}},
                 D(c.files_dropped));
    sink.Counter("lakecache_order_hint_files_total", help, {{"outcome", "missing"}},
                 D(c.files_missing));
    sink.Counter("lakecache_order_hint_fetched_bytes_total",
                 "Bytes the order hint fetched ahead of the readers", {}, D(c.bytes_fetched));
    sink.Gauge("lakecache_order_hint_ahead_bytes",
               "Bytes the order hint fetched that no reader has opened yet", {},
               D(hints->bytes_ahead()));
  }
  if (loads != nullptr) loads->AddMetrics(sink);
}

}  // namespace lakecache
