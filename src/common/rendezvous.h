// Rendezvous (highest random weight) hashing, weighted: the placement of blocks on cache
// directories and on workers.
//
// Each node scores `weight / -ln(u)`, u a uniform hash of (key, node seed) in (0, 1); the highest
// score wins. A node gets a share of keys proportional to its weight; adding or removing a node
// moves only the keys it wins or won (about 1/N of them), and the order of the node list does not
// matter. Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace lakecache {

struct RendezvousNode {
  uint64_t seed = 0;  // a stable hash of the node's identity (RendezvousSeed of its id or path)
  double weight = 1;  // > 0, e.g. capacity in bytes
};

uint64_t RendezvousSeed(std::string_view id);

// The score of `node` for a key whose 64-bit hash is `key_hash`.
double RendezvousScore(uint64_t key_hash, const RendezvousNode& node);

// Index of the winning node. REQUIRES: nodes non-empty.
size_t RendezvousPick(uint64_t key_hash, std::span<const RendezvousNode> nodes);

// Every node's index, best first: the order in which to try them when the best one fails.
std::vector<size_t> RendezvousOrder(uint64_t key_hash, std::span<const RendezvousNode> nodes);

// A worker's node in the placement of blocks: seeded by its id, weighted by its capacity (at
// least 1). Clients and the master must agree on it, or a load caches blocks where no reader looks.
RendezvousNode PlacementNode(std::string_view worker_id, uint64_t capacity_bytes);

}  // namespace lakecache
