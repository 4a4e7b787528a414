// HolderBook: what the owner of blocks knows of their replicas, and where it sends the next worker
// that asks for one.
//
// A worker that reads a block it does not own, to keep it as a replica (a mount of its host asked
// for it), asks the block's owner. The owner answers with the bytes, or sends the worker to one of
// the block's holders, so that a block many hosts read at once leaves the owner's link once or a
// few times instead of once per host:
//  - every worker routed is recorded as a holder at once: it has the block, or is receiving it
//    and passes each piece on as it lands (worker/block_relay.h), so the next asker may be sent
//    to it right away, and readers that arrive together form a chain or a tree that pipelines the
//    block;
//  - the asker goes to whichever of the owner and the block's other holders this owner has sent
//    the fewest askers to lately (the owner counting what it served itself), so that the bytes
//    each worker sends even out, whichever host happens to ask first;
//  - a worker that asks again for a block it was routed to before has lost its copy, and is
//    served by the owner: those routed after it may be fetching from it, and sent to one of them
//    it would wait on itself. Every other asker is sent to one routed before it, so no worker
//    ever waits on itself (no cycles).
// One that turns out not to hold the block (evicted, restarted) is dropped when its asker comes
// back (Forget), and a worker that left the cluster with DropWorker. Only block keys and worker
// ids are kept, for at most max_blocks blocks (the least recently routed go first), so a wrong
// entry costs one extra hop, never wrong bytes: the asker checks every replica against the
// owner's digest (Route's digest slot, memoized here). Thread-safe.
#pragma once

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
  // The counts of askers sent to each worker are halved every this many routes: "lately".
  uint64_t halve_every = 4096;
};

class HolderBook {
 public:
  explicit HolderBook(HolderBookOptions options = {}) : options_(options) {}

  // Where `requester` should read `key` from: nullopt for this worker (the owner), else a
  // holder's id. Records `requester` as a holder.
  std::optional<std::string> Route(const BlockKey& key, const std::string& requester) EXCLUDES(mu_);
  // `holder` did not have `key` when asked.
  void Drop(const BlockKey& key, const std::string& holder) EXCLUDES(mu_);
  // A holder of `key` failed an asker, which did not say which: none is named until known again.
  void Forget(const BlockKey& key) EXCLUDES(mu_);
  // `holder` got `key` from the owner itself (counted as sent by the owner).
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
    std::optional<uint64_t> digest;
    std::list<BlockKey>::iterator age;
  };
  Entry& Touch(const BlockKey& key) REQUIRES(mu_);
  void AddHolder(Entry& entry, const std::string& holder) REQUIRES(mu_);

  const HolderBookOptions options_;
  mutable Mutex mu_;
  std::unordered_map<BlockKey, Entry, BlockKeyHash> entries_ GUARDED_BY(mu_);
  std::list<BlockKey> ages_ GUARDED_BY(mu_);  // least recently routed first
  // Askers sent to each worker lately ("": this owner itself), and the routes since the halving.
  std::unordered_map<std::string, uint64_t> sent_to_ GUARDED_BY(mu_);
  uint64_t routes_ GUARDED_BY(mu_) = 0;
};

}  // namespace lakecache
