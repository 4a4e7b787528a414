// BlockRelay: a block this worker is receiving from a peer, served on to other workers while its
// bytes land, so that a chain of holders (HolderBook) pipelines a block instead of storing and
// forwarding it whole: a worker the owner sent to this one gets each piece a moment after this
// one did.
//
// The worker fetching the block (PeerReads::Fetch) makes the relay, lists it in the worker's
// RelayTable under the block's key before it asks the owner, reports the bytes as they land
// (rpc::ReadProgress), and takes it out of the table when the fetch ends; a held-only read
// (kReadHeldOnly) that finds it there streams the block from it. The bytes are never checked
// here: every asker checks the whole block against the owner's digest, so a relay that fails
// (Fail: the upstream read broke, or its bytes did not match) only makes its readers fail and ask
// the owner. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "cache/block.h"
#include "cache/block_key.h"
#include "common/mutex.h"
#include "common/result.h"
#include "rpc/bulk_connection.h"

namespace lakecache {

class BlockRelay final : public rpc::ReadProgress {
 public:
  BlockRelay(std::shared_ptr<Block> block, uint64_t length)
      : block_(std::move(block)), length_(length) {}

  // Bytes [0, bytes) of the block are in place.
  void Landed(uint64_t bytes) EXCLUDES(mu_) override;
  // No more bytes will land here (the fetch ended, or broke and writes the block again): a wait for
  // bytes that have not landed fails from now on.
  void Fail() EXCLUDES(mu_);
  // Waits until at least min(want, length) bytes landed; returns how many have. kUnavailable when
  // they will not (Fail), kDeadlineExceeded when `deadline` passed first.
  Result<uint64_t> WaitFor(uint64_t want, std::chrono::steady_clock::time_point deadline)
      EXCLUDES(mu_);

  const std::shared_ptr<Block>& block() const { return block_; }
  uint64_t length() const { return length_; }

 private:
  const std::shared_ptr<Block> block_;
  const uint64_t length_;
  Mutex mu_;
  CondVar landed_cv_;
  uint64_t landed_ GUARDED_BY(mu_) = 0;
  bool failed_ GUARDED_BY(mu_) = false;
};

// The relays of the blocks a worker is receiving, by key.
class RelayTable {
 public:
  std::shared_ptr<BlockRelay> Find(const BlockKey& key) const EXCLUDES(mu_);
  void Add(const BlockKey& key, std::shared_ptr<BlockRelay> relay) EXCLUDES(mu_);
  // Takes out `key`'s relay if it is still `relay` (a later fetch of the key may have listed its
  // own).
  void Remove(const BlockKey& key, const BlockRelay* relay) EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::unordered_map<BlockKey, std::shared_ptr<BlockRelay>, BlockKeyHash> relays_ GUARDED_BY(mu_);
};

}  // namespace lakecache
