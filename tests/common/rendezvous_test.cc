#include "common/rendezvous.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace lakecache {
namespace {

std::vector<RendezvousNode> Nodes(int n, int first = 0) {
  std::vector<RendezvousNode> nodes;
  for (int i = first; i < first + n; ++i) {
    nodes.push_back({RendezvousSeed("worker-" + std::to_string(i)), 100.0});
  }
  return nodes;
}

// With N = 10 workers over 1M blocks, one worker leaving or joining moves at most 1/N + 2% of the
// blocks, and only blocks of (or to) that worker move.
TEST(RendezvousTest, LeaveOrJoinMovesOnlyThatWorkersShare) {
  constexpr int kN = 10;
  constexpr uint64_t kBlocks = 1'000'000;
  std::vector<RendezvousNode> ten = Nodes(kN);
  std::vector<RendezvousNode> nine(ten.begin(), ten.end() - 1);  // worker-9 left
  std::vector<RendezvousNode> eleven = Nodes(kN + 1);            // worker-10 joined
  uint64_t moved_leave = 0, moved_join = 0;
  for (uint64_t key = 0; key < kBlocks; ++key) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;  // any spread of 64-bit key hashes
    size_t before = RendezvousPick(h, ten);
    size_t after_leave = RendezvousPick(h, nine);
    if (before != after_leave) {
      ++moved_leave;
      ASSERT_EQ(before, kN - 1u) << "a block of a worker that stayed moved";
    }
    size_t after_join = RendezvousPick(h, eleven);
    if (before != after_join) {
      ++moved_join;
      ASSERT_EQ(after_join, static_cast<size_t>(kN)) << "a block moved between old workers";
    }
  }
  double bound = 1.0 / kN + 0.02;
  EXPECT_LE(double(moved_leave) / kBlocks, bound) << moved_leave;
  EXPECT_LE(double(moved_join) / kBlocks, bound) << moved_join;
  EXPECT_GT(moved_leave, 0u);
  EXPECT_GT(moved_join, 0u);
}

TEST(RendezvousTest, SharesFollowWeightsAndNodeOrderDoesNotMatter) {
  std::vector<RendezvousNode> nodes = Nodes(3);
  nodes[2].weight = 200;  // twice the others: half of the keys
  std::vector<RendezvousNode> reversed(nodes.rbegin(), nodes.rend());
  std::vector<uint64_t> count(3, 0);
  constexpr uint64_t kKeys = 200'000;
  for (uint64_t key = 0; key < kKeys; ++key) {
    uint64_t h = (key + 1) * 0xC2B2AE3D27D4EB4Full;
    size_t pick = RendezvousPick(h, nodes);
    ++count[pick];
    ASSERT_EQ(2 - RendezvousPick(h, reversed), pick);
  }
  EXPECT_NEAR(double(count[0]) / kKeys, 0.25, 0.01);
  EXPECT_NEAR(double(count[1]) / kKeys, 0.25, 0.01);
  EXPECT_NEAR(double(count[2]) / kKeys, 0.50, 0.01);
}

TEST(RendezvousTest, OrderStartsWithThePickAndListsEveryNodeOnce) {
  std::vector<RendezvousNode> nodes = Nodes(5);
  for (uint64_t key = 1; key < 1000; ++key) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    std::vector<size_t> order = RendezvousOrder(h, nodes);
    ASSERT_EQ(order.size(), 5u);
    EXPECT_EQ(order[0], RendezvousPick(h, nodes));
    std::vector<bool> seen(5, false);
    for (size_t i : order) seen[i] = true;
    EXPECT_EQ(std::count(seen.begin(), seen.end(), true), 5);
    // Without the first choice, the pick is the second in the order (failover goes where a
    // departure would send the block).
    std::vector<RendezvousNode> rest;
    std::vector<size_t> index;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (i != order[0]) rest.push_back(nodes[i]), index.push_back(i);
    }
    EXPECT_EQ(index[RendezvousPick(h, rest)], order[1]);
  }
}

TEST(RendezvousTest, PlacementNodeIsSeededByTheIdAndWeighedByCapacity) {
  EXPECT_EQ(PlacementNode("worker-a", 1 << 30).seed, RendezvousSeed("worker-a"));
  EXPECT_EQ(PlacementNode("worker-a", 1 << 30).weight, static_cast<double>(1 << 30));
  EXPECT_EQ(PlacementNode("worker-a", 0).weight, 1.0);  // no capacity reported: a minimal share
}

}  // namespace
}  // namespace lakecache
