#include "cluster_client/cluster_view.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "cluster_client/node_memory.h"
#include "rpc/grpc_util.h"
#include "rpc/node_socket.h"

namespace lakecache {
namespace {

bool SameIncarnation(const ViewWorker& w, const rpc::WorkerInfo& info) {
  return w.id == info.id() && w.address == info.address() &&
         w.start_time_ms == info.start_time_ms() && w.data_address == info.data_address();
}

std::shared_ptr<WorkerPeer> NewPeer(const rpc::WorkerInfo& info,
                                    const ClusterClientOptions& options,
                                    const std::shared_ptr<const rpc::TlsContext>& bulk_tls) {
  auto peer = std::make_shared<WorkerPeer>();
  peer->channel = security::WorkerChannel(info.address(), info.id(), options.credentials.get());
  peer->stub = rpc::WorkerService::NewStub(peer->channel);
  if (options.transport == ClusterClientOptions::Transport::kBulk && !info.data_address().empty()) {
    peer->bulk = std::make_unique<BulkClient>(
        info.data_address(),
        BulkClientOptions{options.bulk_connections, bulk_tls,
                          options.credentials != nullptr ? security::WorkerTlsName(info.id()) : "",
                          options.credentials});
  }
  return peer;
}

// `info` as a worker of the new view, with what it keeps of `old`.
ViewWorker NewViewWorker(const rpc::WorkerInfo& info, const ClientView& old,
                         const ClusterClientOptions& options,
                         const std::shared_ptr<const rpc::TlsContext>& bulk_tls) {
  ViewWorker worker{info.id(),      info.address(),     info.capacity_bytes(), info.start_time_ms(),
                    info.host_id(), info.node_socket(), info.data_address(),   nullptr,
                    nullptr};
  for (const ViewWorker& w : old.workers) {
    // The same incarnation at the same address keeps its channel, its down mark and its mapped
    // memory while its node socket is open; a restarted worker starts afresh (up).
    if (!SameIncarnation(w, info)) continue;
    worker.peer = w.peer;
    if (w.shm != nullptr && !rpc::NodeSocketClosed(w.shm->session_fd())) worker.shm = w.shm;
    if (w.shm != nullptr && worker.shm == nullptr) {
      w.shm->Close();  // reads in flight finish; the mappings go with the last of them
      spdlog::info("worker {} closed its shared memory: reading its blocks over the network", w.id);
    }
  }
  if (worker.peer == nullptr) worker.peer = NewPeer(info, options, bulk_tls);
  if (options.short_circuit && worker.shm == nullptr && !info.node_socket().empty() &&
      !info.host_id().empty() && info.host_id() == rpc::HostId() &&
      !worker.peer->node_tried.exchange(true)) {
    worker.shm = MapWorkerMemory(info.id(), info.node_socket(), options.prefault);
  }
  return worker;
}

}  // namespace

std::shared_ptr<const ClientView> BuildView(
    const rpc::ClusterView& got, const ClientView& old, const ClusterClientOptions& options,
    const std::shared_ptr<const rpc::TlsContext>& bulk_tls) {
  auto view = std::make_shared<ClientView>();
  view->epoch = got.epoch();
  for (const rpc::WorkerInfo& info : got.workers()) {
    view->workers.push_back(NewViewWorker(info, old, options, bulk_tls));
  }
  std::sort(view->workers.begin(), view->workers.end(),
            [](const ViewWorker& a, const ViewWorker& b) { return a.id < b.id; });
  for (size_t i = 0; i < view->workers.size(); ++i) {
    const ViewWorker& w = view->workers[i];
    // Weighted by capacity; a worker that reports none still gets a minimal share.
    view->nodes.push_back(PlacementNode(w.id, w.capacity));
    if (w.shm != nullptr) view->local.push_back(i);
  }
  return view;
}

}  // namespace lakecache
