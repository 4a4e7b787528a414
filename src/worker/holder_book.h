// HolderBook: what the owner of blocks knows of their replicas, and where it sends the next worker
// that asks for one.
//
// A worker that reads a block it does not own, to keep it as a replica (a mount of its host asked
// for it), asks the block's owner. The owner answers with the bytes, or sends the worker to one of
// the block's holders, so that a block many hosts read at once leaves the owner's link once or a
// few times instead of once per host:
//  - while the last worker sent somewhere is still fetching (it was routed less than `in_flight`
//    ago), the next one is sent to it: readers that arrive together form a chain, each fetching
//    from the one before it once the block has arrived there (the holder's single-flight), so
//    every link carries the block once; a chain grows to `max_chain` workers, and the next asker
//    starts another at the owner;
//  - afterwards, askers go round the holders and the owner in turn;
//  - a worker that asks again for a block it was routed to before has lost its copy, and is
//    served by the owner: those routed after it may be fetching from it, and sent to one of them
//    it would wait on itself. So every worker waits only on one routed before it (no cycles).
// Every worker routed is recorded as a holder; one that turns out not to hold the block (evicted,
// restarted) is dropped when its asker comes back (Drop), and a worker that left the cluster with
// DropWorker. Only block keys and worker ids are kept, for at most max_blocks blocks (the least
// recently routed go first), so a wrong entry costs one extra hop, never wrong bytes: the asker
// checks every replica against the owner's digest (Route's digest slot, memoized here).
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/block_key.h"
#include "common/mutex.h"

namespace lakecache {

struct HolderBookOptions {
  size_t max_blocks = 1 << 16;
  size_t max_holders = 16;  // per block; the oldest routed goes first
  std::chrono::milliseconds in_flight{2000};
  // The longest chain: each link waits for the whole block from the one before it, so the last
  // of a long chain waits that many block transfers. Past it, the next asker starts a new chain
  // at the owner (whose link then carries the block once per chain).
  size_t max_chain = 4;
};

class HolderBook {
 public:
  explicit HolderBook(HolderBookOptions options = {}) : options_(options) {}

  // Where `requester` should read `key` from: nullopt for this worker (the owner), else a
  // holder's id. Records `requester` as a holder.
  std::optional<std::string> Route(
      const BlockKey& key, const std::string& requester,
      std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) EXCLUDES(mu_);
  // `holder` did not have `key` when asked.
  void Drop(const BlockKey& key, const std::string& holder) EXCLUDES(mu_);
  // A holder of `key` failed an asker, which did not say which: none is named until known again.
  void Forget(const BlockKey& key) EXCLUDES(mu_);
  // `holder` got `key` from the owner itself.
  void Note(const BlockKey& key, const std::string& holder) EXCLUDES(mu_);
  // `worker` left the cluster: it holds nothing any more.
  void DropWorker(const std::string& worker) EXCLUDES(mu_);

  // The digest the owner gave the block's replicas, if it has one.
  std::optional<uint64_t> Digest(const BlockKey& key) const EXCLUDES(mu_);
  void SetDigest(const BlockKey& key, uint64_t digest) EXCLUDES(mu_);

  std::vector<std::string> Holders(const BlockKey& key) const EXCLUDES(mu_);
  size_t blocks() const EXCLUDES(mu_);

 private:
  struct Entry {
    std::vector<std::string> holders;  // in the order they were routed
    std::string tail;                  // the last routed
    std::chrono::steady_clock::time_point tail_at;
    size_t tail_depth = 0;  // its place in its chain: 1 when it reads from the owner
    size_t next = 0;        // the turn among the owner (0) and the holders (1...)
    std::optional<uint64_t> digest;
    std::list<BlockKey>::iterator age;
  };
  Entry& Touch(const BlockKey& key) REQUIRES(mu_);
  void AddHolder(Entry& entry, const std::string& holder) REQUIRES(mu_);

  const HolderBookOptions options_;
  mutable Mutex mu_;
  std::unordered_map<BlockKey, Entry, BlockKeyHash> entries_ GUARDED_BY(mu_);
  std::list<BlockKey> ages_ GUARDED_BY(mu_);  // least recently routed first
};

}  // namespace lakecache
