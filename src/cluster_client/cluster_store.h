// ClusterStore: one namespace of a cluster, seen as an ObjectStore, so the FileSystem reads a
// cluster exactly as it reads S3.
//
// List (one folder, delimiter "/") and Head go to the master's shared metadata cache; Read goes
// to the workers block by block (ClusterClient::ReadBlock), each block to its owner. A read names
// the object version by ReadOptions::if_match and object_size (the FileSystem always knows both);
// without them it asks the master first. A worker that finds the object changed (its store sent
// another version) fails the read with kPreconditionFailed, and the folder's next listing asks the
// master to list it again. Recursive listings are not served: the file system never
// needs them.
//
// Writes go to a worker (ClusterClient::WriteBody, WriteCall), which makes them on the store with
// its credentials; an object made, copied or removed is told to the master's metadata cache
// (NoteWrite), so every mount's next listing of its folder shows it. Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>

#include "cluster_client/cluster_client.h"
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

  Result<ObjectInfo> Put(std::string_view key, std::span<const char> data,
                         const PutOptions& options) override;
  Status Delete(std::string_view key, const IoOptions& options) override;
  Result<ObjectInfo> Copy(std::string_view from_key, std::string_view to_key,
                          const IoOptions& options) override;
  Result<std::string> CreateMultipartUpload(std::string_view key,
                                            const IoOptions& options) override;
  Result<std::string> UploadPart(std::string_view key, std::string_view upload_id, int part_number,
                                 std::span<const char> data, const IoOptions& options) override;
  Result<ObjectInfo> CompleteMultipartUpload(std::string_view key, std::string_view upload_id,
                                             const std::vector<CompletedPart>& parts,
                                             const IoOptions& options) override;
  Status AbortMultipartUpload(std::string_view key, std::string_view upload_id,
                              const IoOptions& options) override;
  Result<std::vector<PendingUpload>> ListMultipartUploads(std::string_view prefix,
                                                          const IoOptions& options) override;

 private:
  // The path of a bucket-relative key within the namespace; kNotFound outside it.
  Result<std::string> PathOf(std::string_view key) const;
  // A write call of `op` on `key` through a worker.
  Result<rpc::WriteCallResponse> Call(int op, std::string_view key, const IoOptions& options,
                                      const std::function<void(rpc::WriteCallRequest&)>& fill = {});
  // Tells the master of the object `info` made at `key` (removed: gone). A failure only logs:
  // the write is done, and the master's listing catches up with its TTL.
  void TellMaster(std::string_view key, const ObjectInfo* info, const IoOptions& options);
  static ObjectInfo Written(std::string_view key, const rpc::WrittenObject& w);
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
