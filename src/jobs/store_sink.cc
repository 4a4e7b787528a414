#include "jobs/store_sink.h"

#include <future>

#include "fetch/block_fetch.h"

namespace lakecache {

BlockOutcome StoreSink::Fetch(Namespace& ns, const BlockRequest& request) {
  ObjectStore& store = *ns.store;
  Result<BlockRef> got = blocks_->Get(request, [&store, this](const BlockRequest& r) {
    return FetchBlock(store, r, blocks_->Allocator());
  });
  if (!got.ok()) return {BlockState::kFailed, got.status().ToString()};
  if (!blocks_->Contains(request.key)) {
    return {BlockState::kFailed,
            "fetched, but the cache did not keep the block (its tiers are full or too small)"};
  }
  return {BlockState::kLoaded, ""};
}

std::vector<BlockOutcome> StoreSink::Load(const std::string& ns_name,
                                          std::span<const BlockSpec> blocks, bool check_only) {
  std::vector<BlockOutcome> out(blocks.size());
  Namespace* ns = namespaces_->Find(ns_name);
  if (ns == nullptr) {
    for (BlockOutcome& o : out) o = {BlockState::kFailed, "unknown namespace '" + ns_name + "'"};
    return out;
  }
  std::vector<std::future<void>> fetches;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const ObjectSpec& object = blocks[i].object;
    ContentId content = MakeContentId(ns_name, object.key, object.etag, object.block_size);
    if (index_ != nullptr) index_->Note(ns_name, content, object.size, object.block_size);
    BlockRequest request = MakeBlockRequest(content, object.key, object.etag, object.size,
                                            object.block_size, blocks[i].index);
    if (blocks_->Contains(request.key)) {
      out[i].state = BlockState::kAlreadyCached;
    } else if (check_only) {
      out[i].state = BlockState::kMissing;
    } else if (pool_ == nullptr) {
      out[i] = Fetch(*ns, request);
    } else {
      fetches.push_back(pool_->Submit([this, ns, request = std::move(request), slot = &out[i]] {
        *slot = Fetch(*ns, request);
      }));
    }
  }
  for (auto& f : fetches) f.wait();
  return out;
}

Result<uint64_t> StoreSink::Free(const std::string& ns_name, std::span<const ObjectSpec> objects) {
  if (namespaces_->Find(ns_name) == nullptr) {
    return Status::NotFound("unknown namespace '" + ns_name + "'");
  }
  uint64_t freed = 0;
  for (const ObjectSpec& object : objects) {
    ContentId content = MakeContentId(ns_name, object.key, object.etag, object.block_size);
    for (uint64_t b = 0; b < object.blocks(); ++b) {
      BlockKey key{content, b};
      if (!blocks_->Contains(key)) continue;
      blocks_->Erase(key);
      ++freed;
    }
  }
  return freed;
}

}  // namespace lakecache
