#include "common/rendezvous.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace lakecache {

uint64_t RendezvousSeed(std::string_view id) { return XXH3_64bits(id.data(), id.size()); }

double RendezvousScore(uint64_t key_hash, const RendezvousNode& node) {
  uint64_t mixed[2] = {key_hash, node.seed};
  uint64_t h = XXH3_64bits(mixed, sizeof(mixed));
  double u = (static_cast<double>(h >> 11) + 0.5) * 0x1p-53;  // uniform in (0, 1)
  return node.weight / -std::log(u);
}

size_t RendezvousPick(uint64_t key_hash, std::span<const RendezvousNode> nodes) {
  size_t best = 0;
  double best_score = -1;
  for (size_t i = 0; i < nodes.size(); ++i) {
    double score = RendezvousScore(key_hash, nodes[i]);
    if (score > best_score) best = i, best_score = score;
  }
  return best;
}

std::vector<size_t> RendezvousOrder(uint64_t key_hash, std::span<const RendezvousNode> nodes) {
  std::vector<double> scores(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) scores[i] = RendezvousScore(key_hash, nodes[i]);
  std::vector<size_t> order(nodes.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return scores[a] != scores[b] ? scores[a] > scores[b] : a < b;
  });
  return order;
}

RendezvousNode PlacementNode(std::string_view worker_id, uint64_t capacity_bytes) {
  return {RendezvousSeed(worker_id), std::max<double>(1.0, static_cast<double>(capacity_bytes))};
}

}  // namespace lakecache
