// ClusterClientOptions: how a cluster mount reaches the master and the workers (timeouts, the
// block transport, shared memory, the silent-worker probe, credentials). A plain value, copied
// into each part of the client that needs it.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>

#include "security/auth.h"

namespace lakecache {

struct ClusterClientOptions {
  std::chrono::milliseconds rpc_timeout{10000};      // one master call
  std::chrono::milliseconds connect_timeout{10000};  // Connect: how long to wait for the master
  // Read blocks of a worker on this host where they lie: its memory cache mapped from shared
  // memory (node socket), its cache files opened and verified here. False: over the network.
  bool short_circuit = true;
  // Map each shared block's pages on first use (see ShmReader::Map).
  bool prefault = false;
  // A block that a worker of another host owns is read through this host's worker (one whose
  // memory this client maps), which gets it from the cluster and keeps it as a replica
  // (worker/block_reader.h: kReadAsReplica): the host's next readers find it in memory, and hosts
  // that read the same data share the owner's link. False: always from the owner.
  bool replicas = true;
  // How blocks are streamed: kBulk, the worker's bulk data path (framed TCP, see BulkClient) when
  // it advertises one, else gRPC; kGrpc: always ReadBlock over gRPC.
  enum class Transport { kBulk, kGrpc };
  Transport transport = Transport::kBulk;
  size_t bulk_connections = 4;  // per worker
  // A silent worker (stopped, hung, cut off) gives TCP no sign, so a read waiting on it would wait
  // out its deadline. Once a read over the bulk path has waited `probe_after` on a worker, the
  // client pings it on a connection of its own; no answer within `probe_timeout`, and the worker
  // is marked down and its reads fail over to the next worker at once. A worker that answers is
  // only slow (its object store is) and is waited for.
  std::chrono::milliseconds probe_after{1000};
  std::chrono::milliseconds probe_timeout{2000};
  // The client role's credentials (security/auth.h): TLS to the master and to every worker (each
  // verified against its own name), the token on every call and bulk connection. Null: plain.
  std::shared_ptr<const security::ClusterCredentials> credentials;
};

}  // namespace lakecache
