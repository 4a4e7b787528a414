#include "cluster_client/worker_prober.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace lakecache {

void WorkerProber::ProbeWaited(const ClientView& view) {
  for (const ViewWorker& worker : view.workers) {
    BulkClient* bulk = worker.peer->bulk.get();
    if (bulk == nullptr) continue;
    auto now = std::chrono::steady_clock::now();
    auto waited = now - std::min(now, bulk->OldestRequest());
    int64_t now_ms = SteadyNowMs();
    // One probe per probe_after at most: a worker that answered is slow, not silent.
    if (waited < options_.probe_after ||
        now_ms - worker.peer->answered_ms.load() < options_.probe_after.count()) {
      continue;
    }
    Status probe = bulk->Probe(now + options_.probe_timeout);
    if (probe.ok()) {
      worker.peer->answered_ms.store(SteadyNowMs());
      continue;
    }
    live_.MarkDown(*worker.peer);
    size_t failed = bulk->AbortRequests();
    silent_workers_.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn(
        "worker {} at {} did not answer a ping within {} while a read waited {} on it: {}; "
        "failing its {} read(s) over to the next workers",
        worker.id, worker.data_address, FormatDuration(options_.probe_timeout),
        FormatDuration(std::chrono::duration_cast<std::chrono::milliseconds>(waited)),
        probe.message(), failed);
  }
}

}  // namespace lakecache
