// ClusterStore: one namespace of a cluster, seen as an ObjectStore, so the FileSystem reads a
// cluster exactly as it reads S3.
//
// List (one folder, delimiter "/") and Head go to the master's shared metadata cache; Read goes
// to the workers block by block (ClusterClient::ReadBlock), each block to its owner. A read names
// the object version by ReadOptions::if_match and object_size (the FileSystem always knows both);
// without them it asks the master first. A worker that finds the object changed (its store sent
// another version) fails the read with kPreconditionFailed, and the folder's next listing asks the
// master to list it again. Recursive listings are not served: the file system never
// needs them. Thread-safe.
#pragma once

#include <memory>
#include <set>
#include <string>

#include "client/cluster_client.h"
#include "common/mutex.h"
#include "rpc/lakecache.pb.h"
#include "ufs/object_store.h"

namespace lakecache {

class ClusterStore : public ObjectStore {
 public:
  ClusterStore(std::shared_ptr<ClusterClient> client, ClusterNamespace ns);

  std::string Describe() const override;
  Result<ListPage> List(const ListRequest& request, const IoOptions& options) override;
  Result<ObjectInfo> Head(std::string_view key, const IoOptions& options) override;
  Result<ReadReply> ReadRaw(std::string_view key, uint64_t offset,
                            std::span<const std::span<char>> bufs,
                            const ReadOptions& options) override;

 private:
  // The path of a bucket-relative key within the namespace; kNotFound outside it.
  Result<std::string> PathOf(std::string_view key) const;
  // Remembers the folder of `key` as changed (see stale_dirs_).
  void NoteChanged(std::string_view key);
  // Reads [offset, offset + buf.size()) of the version `id` names, block by block from owners.
  Result<size_t> ReadBlocks(rpc::BlockId& id, uint64_t offset, std::span<char> buf,
                            Clock::time_point deadline);

  std::shared_ptr<ClusterClient> client_;
  ClusterNamespace ns_;
  Mutex stale_mu_;
  // Folders (namespace-relative) where a worker found an object changed: their next listing asks
  // the master to revalidate.
  std::set<std::string> stale_dirs_ GUARDED_BY(stale_mu_);
};

}  // namespace lakecache
