// ClusterStore: one namespace of a cluster, seen as an ObjectStore, so the FileSystem reads a
// cluster exactly as it reads S3.
//
// List (one folder, delimiter "/") and Head go to the master's shared metadata cache; Read goes
// to the workers block by block (ClusterClient::ReadBlock), each block to its owner. A read names
// the object version by ReadOptions::if_match and object_size (the FileSystem always knows both);
// without them it asks the master first. Recursive listings are not served: the file system never
// needs them. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "client/cluster_client.h"
#include "ufs/object_store.h"

namespace lakecache {

class ClusterStore : public ObjectStore {
 public:
  ClusterStore(std::shared_ptr<ClusterClient> client, ClusterNamespace ns);

  std::string Describe() const override;
  Result<ListPage> List(const ListRequest& request, const IoOptions& options) override;
  Result<ObjectInfo> Head(std::string_view key, const IoOptions& options) override;
  Result<size_t> Read(std::string_view key, uint64_t offset, std::span<char> buf,
                      const ReadOptions& options) override;

 private:
  // The path of a bucket-relative key within the namespace; kNotFound outside it.
  Result<std::string> PathOf(std::string_view key) const;

  std::shared_ptr<ClusterClient> client_;
  ClusterNamespace ns_;
};

}  // namespace lakecache
