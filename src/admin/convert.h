// Conversions between protocol messages and the types of the layers below: cache statistics,
// blocks and object versions of a load, load progress, path status. Pure functions.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "cache/block_store.h"
#include "cache/content_index.h"
#include "jobs/load_job.h"
#include "rpc/lakecache.pb.h"

namespace lakecache::rpc {

// The tiers and fetch counters of `stats`, and the per-namespace usage, into `out`.
void FillStats(const BlockStoreStats& stats, const std::vector<ContentIndex::Usage>& usage,
               WorkerStats* out);

BlockId ToBlockId(const std::string& ns, const BlockSpec& block);
// The first block of object version `v` (a Free names objects; the worker resolves each by it).
BlockId ToBlockId(const ObjectVersion& v);
ObjectVersion ToObjectVersion(const std::string& ns, const ObjectSpec& object);
ObjectSpec FromObjectVersion(const ObjectVersion& object);

BlockResult ToProto(const BlockOutcome& outcome);
BlockOutcome FromProto(const BlockResult& result);

void ToProto(const lakecache::LoadProgress& progress, uint32_t replicas, LoadProgress* out);
void ToProto(const PathStatus& status, StatPathResponse* out);

}  // namespace lakecache::rpc
