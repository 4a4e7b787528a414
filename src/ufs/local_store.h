// LocalStore: an ObjectStore over a local directory, for file:// namespaces and for tests.
//
// A key is a relative path below the root ("a/b.txt"); directories are not objects. List follows S3
// exactly: byte-wise key order over the whole tree, prefix matched on the key string, delimiter
// grouping, at most 1000 entries a page. Writes put a whole file in place by rename. A multipart
// upload stages its parts in <root>/.lakecache-uploads/<upload id>/, which List never shows and
// no key may name. Thread-safe: every call works on its own file descriptors.
#pragma once

#include <string>
#include <string_view>
#include <vector>

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
  // Writes a temporary file beside the target, fsyncs it and renames it over the key (create-only:
  // links it, failing if the key exists), so readers see the old or the new object, never a
  // partial one. Creates the parent directories. The ETag is the file's version, as Head's.
  Result<ObjectInfo> Put(std::string_view key, std::span<const char> data,
                         const PutOptions& options) override;
  // Removes the file; deleting a missing key succeeds, as on S3. Emptied directories stay (they are
  // invisible to List) so that a concurrent Put below them cannot lose its parent.
  Status Delete(std::string_view key, const IoOptions& options) override;
  // Copies the bytes into a new file put in place as Put does.
  Result<ObjectInfo> Copy(std::string_view from_key, std::string_view to_key,
                          const IoOptions& options) override;

  // Multipart uploads (local_store_uploads.cc), with S3's rules: part numbers 1..10000, parts
  // below kMinPartSize only last, ascending part numbers at Complete, each named by the ETag its
  // UploadPart returned (the part file's version). Complete concatenates the parts into a new
  // file put in place as Put does; the object's ETag is its file's version, as Head's.
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

  // Files whose name starts with this are temporaries of writes; List skips them.
  static constexpr std::string_view kTempPrefix = ".lakecache-tmp.";
  // The staging folder of multipart uploads, below the root.
  static constexpr std::string_view kUploadsDir = ".lakecache-uploads";

 private:
  Result<ObjectInfo> PutFolder(std::string_view key, const IoOptions& options);
  std::string PathOf(std::string_view key) const { return root_ + "/" + std::string(key); }
  std::string Name(std::string_view key) const { return Describe() + "/" + std::string(key); }
  // The staging folder of `upload_id` after checking that it exists and belongs to `key`
  // (kNotFound otherwise, as S3's NoSuchUpload).
  Result<std::string> UploadDir(std::string_view key, std::string_view upload_id) const;

  std::string root_;  // absolute, without a trailing '/'; "" for the file system root
};

}  // namespace lakecache
