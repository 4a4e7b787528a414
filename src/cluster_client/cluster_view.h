// The cluster as one ClusterClient sees it: the workers of one view of the master, each with the
// peer (channel, bulk path, down mark) of its incarnation and, for a worker on this host, its
// memory mapped from shared memory. A ClientView is built whole from the master's answer and never
// changed once installed (LiveView publishes a new one); only a peer's marks change, atomically.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/channel.h>
#include "cache/shm_reader.h"
#include "cluster_client/bulk_client.h"
#include "cluster_client/client_options.h"
#include "common/rendezvous.h"

#include "rpc/lakecache.grpc.pb.h"
#include "rpc/tls.h"

namespace lakecache {

// One incarnation of a worker (id, address, start time): its channel and this client's down mark,
// shared by every view that shows the incarnation. Only the marks change, and they are atomic.
struct WorkerPeer {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<rpc::WorkerService::Stub> stub;  // unary calls; blocks stream raw on `channel`
  std::unique_ptr<BulkClient> bulk;  // the worker's bulk data path, when it has one and it is used
  std::atomic<int64_t> down_until_ms{0};  // steady-clock ms; up once past it
  std::atomic<bool> node_tried{false};    // asked its node socket once
  std::atomic<int64_t> answered_ms{0};    // steady-clock ms of its last answered probe

  bool up(int64_t now_ms) const { return down_until_ms.load(std::memory_order_relaxed) <= now_ms; }
};

// A worker as one view shows it.
struct ViewWorker {
  std::string id;
  std::string address;
  uint64_t capacity = 0;
  int64_t start_time_ms = 0;
  std::string host_id;
  std::string node_socket;
  std::string data_address;
  std::shared_ptr<WorkerPeer> peer;
  std::shared_ptr<ShmReader> shm;  // its memory, mapped: a worker on this host
};

struct ClientView {
  uint64_t epoch = 0;
  std::vector<ViewWorker> workers;    // by id
  std::vector<RendezvousNode> nodes;  // same order
  std::vector<size_t> local;          // the workers whose memory is mapped
};

// The view `got` describes, keeping the peers of `old` that are the same incarnation and the
// shared memory of those whose node socket is still open (mapping that of new co-located ones).
// `bulk_tls`: the client context of the bulk path (from options.credentials); null: plain text.
std::shared_ptr<const ClientView> BuildView(const rpc::ClusterView& got, const ClientView& old,
                                            const ClusterClientOptions& options,
                                            const std::shared_ptr<const rpc::TlsContext>& bulk_tls);

}  // namespace lakecache
