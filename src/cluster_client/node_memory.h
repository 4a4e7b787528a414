// The node's shared memory as a cluster mount sees it: the memory tiers of the workers on this
// host, mapped through their node sockets (rpc/node_socket.h) and read in place. The lookups go
// over the mapped workers of one ClientView; none calls a worker. Thread-safe (a view is
// immutable and ShmReader is thread-safe).
#pragma once

#include <memory>
#include <string>

#include "cache/block.h"
#include "cache/block_key.h"
#include "cache/shm_reader.h"
#include "cluster_client/cluster_view.h"

namespace lakecache {

// A session of this process with the worker behind the node socket `path`: its memory mapped,
// and anchors of its own.
Result<std::shared_ptr<ShmReader>> OpenWorkerSession(const std::string& path, bool prefault);
// Maps the memory of worker `id` behind the node socket `path`; null (the reason logged) when it
// may not.
std::shared_ptr<ShmReader> MapWorkerMemory(const std::string& id, const std::string& path,
                                           bool prefault);
// The mapped worker of `view` whose memory `arena_fd` is (a Block of FindInNodeMemory has it as
// its fd()); null when none.
const ViewWorker* LocalWorkerOfArena(const ClientView& view, int arena_fd);

// The block from the memory of a mapped worker of `view`, anchored while referenced; null when
// none holds it.
BlockRef FindInNodeMemory(const ClientView& view, const BlockKey& key);
bool NodeMemoryContains(const ClientView& view, const BlockKey& key);
// True when the block's owner (first in rendezvous order) is a mapped worker.
bool OwnerIsMapped(const ClientView& view, const BlockKey& key);
uint64_t NodeMappedBytes(const ClientView& view);
// True when some mapped worker of `view` hung up its node socket.
bool SomeNodeSessionClosed(const ClientView& view);

}  // namespace lakecache
