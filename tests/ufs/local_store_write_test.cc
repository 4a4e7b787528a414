// LocalStore's writes: Put, Copy, Delete and multipart uploads staged out of sight.
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ufs/content_md5.h"
#include "ufs/local_store.h"

namespace lakecache {
namespace {

class LocalStoreWriteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "lakecache-lw-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    store_ = std::make_unique<LocalStore>(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  std::string ReadAll(const std::string& key) {
    auto info = store_->Head(key, {});
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    std::string buf(info.ok() ? info->size : 0, '\0');
    auto n = store_->Read(key, 0, buf, {});
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    return buf;
  }

  std::vector<std::string> Keys() {
    auto all = ListAll(*store_, "", "", {});
    EXPECT_TRUE(all.ok()) << all.status().ToString();
    std::vector<std::string> keys;
    if (all.ok()) {
      for (const ObjectInfo& o : all->objects) keys.push_back(o.key);
    }
    return keys;
  }

  // Starts an upload of `key` and uploads `chunks` as parts 1..N in the order `order` gives.
  std::vector<CompletedPart> Upload(const std::string& key, std::string* id,
                                    const std::vector<std::string>& chunks,
                                    const std::vector<int>& order) {
    auto created = store_->CreateMultipartUpload(key, {});
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    *id = created.ok() ? *created : "";
    std::vector<CompletedPart> parts(chunks.size());
    for (int n : order) {
      auto etag = store_->UploadPart(key, *id, n, chunks[n - 1], {});
      EXPECT_TRUE(etag.ok()) << etag.status().ToString();
      parts[n - 1] = {n, etag.ok() ? *etag : "", chunks[n - 1].size()};
    }
    return parts;
  }

  std::string root_;
  std::unique_ptr<LocalStore> store_;
};

const std::string kBig(kMinPartSize, 'a');

TEST_F(LocalStoreWriteTest, PutReturnsTheVersionHeadReports) {
  auto put = store_->Put("d/k", std::string_view("hello"), {});
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  auto head = store_->Head("d/k", {});
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(put->etag, head->etag);
  EXPECT_EQ(put->size, 5u);
}

TEST_F(LocalStoreWriteTest, CreateOnlyPutRefusesAnExistingKey) {
  PutOptions create_only;
  create_only.if_none_match = true;
  ASSERT_TRUE(store_->Put("k", std::string_view("first"), create_only).ok());
  auto again = store_->Put("k", std::string_view("second"), create_only);
  EXPECT_EQ(again.status().code(), StatusCode::kPreconditionFailed) << again.status().ToString();
  EXPECT_EQ(ReadAll("k"), "first");
  EXPECT_EQ(Keys(), std::vector<std::string>{"k"});  // no temporary left behind
}

TEST_F(LocalStoreWriteTest, PartsUploadedOutOfOrderJoinInPartOrder) {
  std::string id;
  auto parts = Upload("mp/obj", &id, {kBig, std::string(kMinPartSize, 'b'), "tail"}, {3, 1, 2});
  auto done = store_->CompleteMultipartUpload("mp/obj", id, parts, {});
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->size, 2 * kMinPartSize + 4);
  EXPECT_EQ(done->etag, store_->Head("mp/obj", {})->etag);
  EXPECT_EQ(ReadAll("mp/obj"), kBig + std::string(kMinPartSize, 'b') + "tail");
  EXPECT_FALSE(std::filesystem::exists(root_ + "/.lakecache-uploads/" + id));
}

TEST_F(LocalStoreWriteTest, UploadsInProgressNeverShow) {
  std::string id;
  Upload("a/pending", &id, {"x"}, {1});
  ASSERT_TRUE(store_->Put("a/visible", std::string_view("v"), {}).ok());
  EXPECT_EQ(Keys(), std::vector<std::string>{"a/visible"});
  auto top = ListAll(*store_, "", "/", {});
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(top->common_prefixes, std::vector<std::string>{"a/"});
  EXPECT_EQ(store_->Head("a/pending", {}).status().code(), StatusCode::kNotFound);
  auto reserved = store_->Head(".lakecache-uploads/" + id + "/key", {});
  EXPECT_EQ(reserved.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Put(".lakecache-uploads/x", std::string_view("x"), {}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(LocalStoreWriteTest, CompleteFollowsS3sRules) {
  std::string id;
  auto parts = Upload("k", &id, {"small", "tail"}, {1, 2});
  auto small = store_->CompleteMultipartUpload("k", id, parts, {});
  EXPECT_EQ(small.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(small.status().message().find("EntityTooSmall"), std::string::npos);

  parts = Upload("k", &id, {kBig, "tail"}, {1, 2});
  std::vector<CompletedPart> descending = {parts[1], parts[0]};
  EXPECT_EQ(store_->CompleteMultipartUpload("k", id, descending, {}).status().code(),
            StatusCode::kInvalidArgument);
  std::vector<CompletedPart> stale = parts;
  stale[1].etag = "not-the-part";
  auto wrong = store_->CompleteMultipartUpload("k", id, stale, {});
  EXPECT_NE(wrong.status().message().find("InvalidPart"), std::string::npos);
  EXPECT_EQ(store_->CompleteMultipartUpload("k", id, {}, {}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->UploadPart("k", id, 0, std::string_view("x"), {}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(store_->CompleteMultipartUpload("k", id, parts, {}).ok());
}

TEST_F(LocalStoreWriteTest, AReuploadedPartReplacesTheOldOne) {
  std::string id;
  auto parts = Upload("k", &id, {kBig, "old"}, {1, 2});
  auto etag = store_->UploadPart("k", id, 2, std::string_view("new!"), {});
  ASSERT_TRUE(etag.ok());
  // The ETag of the replaced part no longer names a part of the upload.
  EXPECT_FALSE(store_->CompleteMultipartUpload("k", id, parts, {}).ok());
  parts[1] = {2, *etag, 4};
  ASSERT_TRUE(store_->CompleteMultipartUpload("k", id, parts, {}).ok());
  EXPECT_EQ(ReadAll("k"), kBig + "new!");
}

TEST_F(LocalStoreWriteTest, AbortDropsTheUploadAndMayBeRepeated) {
  std::string id;
  auto parts = Upload("k", &id, {"x"}, {1});
  ASSERT_TRUE(store_->AbortMultipartUpload("k", id, {}).ok());
  EXPECT_TRUE(store_->AbortMultipartUpload("k", id, {}).ok());
  EXPECT_EQ(store_->CompleteMultipartUpload("k", id, parts, {}).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(store_->UploadPart("k", id, 1, std::string_view("x"), {}).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(store_->Head("k", {}).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store_->ListMultipartUploads("", {})->empty());
}

TEST_F(LocalStoreWriteTest, AnUploadBelongsToItsKey) {
  std::string id;
  Upload("mine", &id, {"x"}, {1});
  EXPECT_EQ(store_->UploadPart("other", id, 1, std::string_view("x"), {}).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(store_->UploadPart("mine", "../../etc", 1, std::string_view("x"), {}).status().code(),
            StatusCode::kNotFound);
}

TEST_F(LocalStoreWriteTest, ListMultipartUploadsFindsPendingUploadsByPrefix) {
  EXPECT_TRUE(store_->ListMultipartUploads("", {})->empty());
  std::string a, b, c;
  Upload("logs/b", &b, {}, {});
  Upload("logs/a", &a, {}, {});
  Upload("data/c", &c, {}, {});
  auto logs = store_->ListMultipartUploads("logs/", {});
  ASSERT_TRUE(logs.ok()) << logs.status().ToString();
  ASSERT_EQ(logs->size(), 2u);
  EXPECT_EQ((*logs)[0].key, "logs/a");
  EXPECT_EQ((*logs)[0].upload_id, a);
  EXPECT_EQ((*logs)[1].key, "logs/b");
  EXPECT_GT((*logs)[1].initiated, 0);
  EXPECT_EQ(store_->ListMultipartUploads("", {})->size(), 3u);
}

TEST_F(LocalStoreWriteTest, CopyMakesAnEqualObject) {
  ASSERT_TRUE(store_->Put("src", std::string_view("copied bytes"), {}).ok());
  auto copy = store_->Copy("src", "dir/dst", {});
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ(copy->size, 12u);
  EXPECT_EQ(copy->etag, store_->Head("dir/dst", {})->etag);
  EXPECT_EQ(ReadAll("dir/dst"), "copied bytes");
  EXPECT_EQ(store_->Copy("missing", "x", {}).status().code(), StatusCode::kNotFound);
}

TEST_F(LocalStoreWriteTest, DeleteOfAMissingKeyIsOk) {
  EXPECT_TRUE(store_->Delete("never/was", {}).ok());
}

// A store that only reads keeps the defaults, which say so.
class ReadOnlyStore : public ObjectStore {
 public:
  std::string Describe() const override { return "ro://bucket"; }
  Result<ListPage> List(const ListRequest&, const IoOptions&) override { return ListPage{}; }
  Result<ObjectInfo> Head(std::string_view, const IoOptions&) override {
    return Status::NotFound("none");
  }
  Result<ReadReply> ReadRaw(std::string_view, uint64_t, std::span<const std::span<char>>,
                            const ReadOptions&) override {
    return Status::NotFound("none");
  }
};

TEST(ObjectStoreDefaultsTest, WritesFailNamingTheStore) {
  ReadOnlyStore store;
  auto put = store.Put("k", std::string_view("x"), {});
  EXPECT_EQ(put.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(put.status().message(), "ro://bucket/k: store ro://bucket cannot write (Put)");
  EXPECT_EQ(store.CreateMultipartUpload("k", {}).status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(store.ListMultipartUploads("", {}).status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(store.Delete("k", {}).code(), StatusCode::kUnimplemented);
}

TEST(ContentMd5Test, DigestsAsS3WantsThem) {
  EXPECT_EQ(Md5Base64(std::string_view("hello")), "XUFAKrxLKna5cZ2REBfFkg==");
  EXPECT_EQ(Md5Hex(std::string_view("a")), "0cc175b9c0f1b6a831c399e269772661");
}

TEST(MultipartEtagTest, IsTheMd5OfThePartMd5sAndTheirCount) {
  std::vector<CompletedPart> parts = {{1, "0cc175b9c0f1b6a831c399e269772661", 1},
                                      {2, "92EB5FFEE6AE2FEC3AD71C777531578F", 1}};
  EXPECT_EQ(MultipartEtag(parts), "96e024ba2074fe77e8e965ba43a704be-2");
  EXPECT_EQ(MultipartEtag({{1, "not-an-md5", 1}}), "");
  EXPECT_EQ(EtagPartCount("96e024ba2074fe77e8e965ba43a704be-2"), 2);
  EXPECT_EQ(EtagPartCount("96e024ba2074fe77e8e965ba43a704be"), 0);
}

TEST(MultipartEtagTest, IsObjectOfUploadNeedsTheEtagAndTheSize) {
  std::vector<CompletedPart> parts = {{1, "0cc175b9c0f1b6a831c399e269772661", 1},
                                      {2, "92eb5ffee6ae2fec3ad71c777531578f", 1}};
  EXPECT_TRUE(IsObjectOfUpload({"k", 2, "96e024ba2074fe77e8e965ba43a704be-2", 0}, parts));
  EXPECT_FALSE(IsObjectOfUpload({"k", 3, "96e024ba2074fe77e8e965ba43a704be-2", 0}, parts));
  EXPECT_FALSE(IsObjectOfUpload({"k", 2, "00000000000000000000000000000000-2", 0}, parts));
  // Part ETags that are no MD5s (encrypted objects): the part count and size must do.
  std::vector<CompletedPart> opaque = {{1, "x", 1}, {2, "y", 1}};
  EXPECT_TRUE(IsObjectOfUpload({"k", 2, "whatever-2", 0}, opaque));
  EXPECT_FALSE(IsObjectOfUpload({"k", 2, "whatever-3", 0}, opaque));
}

}  // namespace
}  // namespace lakecache
