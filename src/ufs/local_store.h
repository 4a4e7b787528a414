// LocalStore: an ObjectStore over a local directory, for file:// namespaces and for tests.
//
// A key is a relative path below the root ("a/b.txt"); directories are not objects. List follows S3
// exactly: byte-wise key order over the whole tree, prefix matched on the key string, delimiter
// grouping, at most 1000 entries a page. Thread-safe: every call works on its own file descriptors.
#pragma once

#include <string>
#include <string_view>

#include "ufs/object_store.h"

namespace lakecache {

class LocalStore : public ObjectStore {
 public:
  // `root` need not exist yet (calls then fail with kNotFound); a relative root is made absolute.
  explicit LocalStore(std::string root);

  std::string Describe() const override;  // "file:///data"

  Result<ListPage> List(const ListRequest& request, const IoOptions& options) override;
  Result<ObjectInfo> Head(std::string_view key, const IoOptions& options) override;
  // Honours options.if_match against the ETag of the opened file; the reply names the version
  // the file has after the read.
  Result<ReadReply> ReadRaw(std::string_view key, uint64_t offset,
                            std::span<const std::span<char>> bufs,
                            const ReadOptions& options) override;
  // Writes a temporary file beside the target, fsyncs it and renames it over the key, so readers
  // see the old or the new object, never a partial one. Creates the parent directories.
  Status Put(std::string_view key, std::span<const char> data, const IoOptions& options) override;
  // Removes the file; deleting a missing key succeeds, as on S3. Emptied directories stay (they are
  // invisible to List) so that a concurrent Put below them cannot lose its parent.
  Status Delete(std::string_view key, const IoOptions& options) override;

  // Files whose name starts with this are Put's temporaries; List skips them.
  static constexpr std::string_view kTempPrefix = ".lakecache-tmp.";

 private:
  std::string PathOf(std::string_view key) const { return root_ + "/" + std::string(key); }
  std::string Name(std::string_view key) const { return Describe() + "/" + std::string(key); }

  std::string root_;  // absolute, without a trailing '/'; "" for the file system root
};

}  // namespace lakecache
