#include "admin/convert.h"

namespace lakecache::rpc {
namespace {

void ToProto(const lakecache::LoadCounts& counts, LoadCounts* out) {
  out->set_files(counts.files);
  out->set_bytes(counts.bytes);
}

}  // namespace

void FillStats(const BlockStoreStats& stats, const std::vector<ContentIndex::Usage>& usage,
               WorkerStats* out) {
  for (const TierStats& t : stats.tiers) {
    TierStatsProto* p = out->add_tiers();
    p->set_tier(t.tier);
    p->set_hits(t.hits);
    p->set_misses(t.misses);
    p->set_inserts(t.inserts);
    p->set_evictions(t.evictions);
    p->set_used_bytes(t.used_bytes);
    p->set_capacity_bytes(t.capacity_bytes);
    p->set_blocks(t.blocks);
    p->set_corrupt_blocks(t.corrupt_blocks);
    p->set_write_errors(t.write_errors);
    p->set_hit_bytes(t.hit_bytes);
    p->set_rejected(t.rejected);
  }
  out->set_prefetch_used(stats.prefetch_used);
  out->set_prefetch_dropped(stats.prefetch_dropped);
  out->set_prefetch_refused(stats.prefetch_refused);
  out->set_prefetches(stats.prefetches);
  for (uint64_t n : stats.fetch_latency_us_log2) out->add_fetch_latency_us_log2(n);
  out->set_fetch_latency_us_total(stats.fetch_latency_us_total);
  out->set_fetches(stats.fetches);
  out->set_fetched_bytes(stats.fetched_bytes);
  out->set_fetch_errors(stats.fetch_errors);
  for (const ContentIndex::Usage& u : usage) {
    NamespaceUsage* n = out->add_namespaces();
    n->set_ns(u.ns);
    n->set_cached_bytes(u.cached_bytes);
    n->set_blocks(u.blocks);
  }
}

BlockId ToBlockId(const std::string& ns, const BlockSpec& block) {
  BlockId id;
  id.set_ns(ns);
  id.set_key(block.object.key);
  id.set_etag(block.object.etag);
  id.set_object_size(block.object.size);
  id.set_block_size(block.object.block_size);
  id.set_index(block.index);
  return id;
}

BlockId ToBlockId(const ObjectVersion& v) {
  BlockId id;
  id.set_ns(v.ns());
  id.set_key(v.key());
  id.set_etag(v.etag());
  id.set_object_size(v.object_size());
  id.set_block_size(v.block_size());
  return id;
}

ObjectVersion ToObjectVersion(const std::string& ns, const ObjectSpec& object) {
  ObjectVersion v;
  v.set_ns(ns);
  v.set_key(object.key);
  v.set_etag(object.etag);
  v.set_object_size(object.size);
  v.set_block_size(object.block_size);
  return v;
}

ObjectSpec FromObjectVersion(const ObjectVersion& object) {
  return ObjectSpec{object.key(), object.etag(), object.object_size(), object.block_size()};
}

BlockResult ToProto(const BlockOutcome& outcome) {
  BlockResult r;
  switch (outcome.state) {
    case lakecache::BlockState::kMissing:
      r.set_state(BLOCK_MISSING);
      break;
    case lakecache::BlockState::kLoaded:
      r.set_state(BLOCK_LOADED);
      break;
    case lakecache::BlockState::kAlreadyCached:
      r.set_state(BLOCK_ALREADY_CACHED);
      break;
    case lakecache::BlockState::kFailed:
      r.set_state(BLOCK_FAILED);
      break;
  }
  r.set_error(outcome.error);
  return r;
}

BlockOutcome FromProto(const BlockResult& result) {
  switch (result.state()) {
    case BLOCK_LOADED:
      return {lakecache::BlockState::kLoaded, ""};
    case BLOCK_ALREADY_CACHED:
      return {lakecache::BlockState::kAlreadyCached, ""};
    case BLOCK_FAILED:
      return {lakecache::BlockState::kFailed, result.error()};
    default:
      return {lakecache::BlockState::kMissing, ""};
  }
}

void ToProto(const lakecache::LoadProgress& p, uint32_t replicas, LoadProgress* out) {
  out->set_dirs(p.dirs);
  out->set_listed(p.listed);
  ToProto(p.total, out->mutable_total());
  ToProto(p.loaded, out->mutable_loaded());
  ToProto(p.already_cached, out->mutable_already_cached());
  ToProto(p.failed, out->mutable_failed());
  for (const lakecache::LoadFailure& f : p.failures) {
    rpc::LoadFailure* pf = out->add_failures();
    pf->set_path(f.path);
    pf->set_error(f.error);
  }
  out->set_done(p.done);
  out->set_complete(p.complete);
  out->set_seconds(p.seconds);
  out->set_replicas(replicas);
  out->set_files_done(p.files_done);
}

void ToProto(const PathStatus& status, StatPathResponse* out) {
  ObjectEntry* e = out->mutable_entry();
  e->set_key(status.key);
  e->set_size(status.entry.size);
  e->set_etag(status.entry.etag);
  e->set_mtime(status.entry.mtime);
  out->set_is_dir(status.entry.is_dir);
  out->set_block_size(status.block_size);
  out->set_blocks_total(status.blocks_total);
  out->set_blocks_cached(status.blocks_cached);
  out->set_cached_bytes(status.cached_bytes);
}

}  // namespace lakecache::rpc
