// S3Store's writes against real servers: s3rver (lenient) and OpenStack Swift with s3api
// (verifies SigV4 and Content-MD5, real multipart ETags). Every case runs against both; where the
// servers differ, the case pins what each does. s3rver 3.7 lacks ListMultipartUploads (501),
// AbortMultipartUpload (405) and UploadPartCopy (501): those cases check the rest on Swift only
// and pin s3rver's kUnimplemented.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <random>

#include "support/store_options.h"
#include "support/test_servers.h"
#include "ufs/content_md5.h"
#include "ufs/fault_injecting_store.h"
#include "ufs/retrying_store.h"
#include "ufs/s3_store.h"

// Its own namespace: the files of integration_tests are compiled in unity batches.
namespace lakecache::s3_write_test {
namespace {

using testing::S3Server;

constexpr char kBucket[] = "lc-write";
constexpr uint64_t kMiB = 1 << 20;

std::string Bytes(size_t size, uint64_t seed) {
  std::string s(size, '\0');
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < size; i += 8) {
    uint64_t v = rng();
    std::memcpy(s.data() + i, &v, std::min<size_t>(8, size - i));
  }
  return s;
}

S3Server& Server(const std::string& kind) { return testing::SharedS3Server(kind, {kBucket}); }

class S3WriteTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    server_ = &Server(GetParam());
    store_ = Open();
    ASSERT_NE(store_, nullptr);
  }

  bool swift() const { return GetParam() == "swift"; }

  // A store without retries, so that every case sees each server's own answer.
  std::shared_ptr<S3Store> Open(const std::function<void(S3StoreOptions&)>& adjust = {}) {
    S3StoreOptions options = testing::StoreOptionsFor(*server_, kBucket);
    if (adjust) adjust(options);
    auto store = S3Store::Create(std::move(options));
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::shared_ptr<S3Store>(std::move(store).value()) : nullptr;
  }

  std::string ReadAll(ObjectStore& store, const std::string& key, size_t size) {
    std::string buf(size + 1, '\0');
    auto n = store.Read(key, 0, buf, ReadOptions{});
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    buf.resize(n.ok() ? *n : 0);
    return buf;
  }

  // Uploads `parts` of `data` (consecutive sizes) in the order `order` gives (part numbers), and
  // returns them as CompleteMultipartUpload wants them.
  std::vector<CompletedPart> UploadParts(ObjectStore& store, const std::string& key,
                                         const std::string& upload_id, const std::string& data,
                                         const std::vector<uint64_t>& sizes,
                                         const std::vector<int>& order) {
    std::vector<uint64_t> offsets = {0};
    for (uint64_t s : sizes) offsets.push_back(offsets.back() + s);
    std::vector<CompletedPart> parts(sizes.size());
    for (int n : order) {
      std::span<const char> body(data.data() + offsets[n - 1], sizes[n - 1]);
      auto etag = store.UploadPart(key, upload_id, n, body, IoOptions{});
      EXPECT_TRUE(etag.ok()) << "part " << n << ": " << etag.status().ToString();
      if (etag.ok()) {
        EXPECT_EQ(*etag, Md5Hex(body)) << "part " << n;
      }
      parts[n - 1] = {n, etag.ok() ? *etag : "", sizes[n - 1]};
    }
    return parts;
  }

  bool Pending(const std::string& prefix, const std::string& upload_id) {
    auto uploads = store_->ListMultipartUploads(prefix, IoOptions{});
    EXPECT_TRUE(uploads.ok()) << uploads.status().ToString();
    if (!uploads.ok()) return false;
    return std::ranges::any_of(*uploads,
                               [&](const PendingUpload& u) { return u.upload_id == upload_id; });
  }

  S3Server* server_ = nullptr;
  std::shared_ptr<S3Store> store_;
};

TEST_P(S3WriteTest, PutReadsBackEqualWithTheEtagHeadReports) {
  const std::string data = Bytes(kMiB + 7, 1);
  auto put = store_->Put("put/one.bin", data, PutOptions{});
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->size, data.size());
  EXPECT_EQ(put->etag, Md5Hex(data));
  auto head = store_->Head("put/one.bin", IoOptions{});
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(head->etag, put->etag);
  EXPECT_EQ(head->size, data.size());
  EXPECT_EQ(ReadAll(*store_, "put/one.bin", data.size()), data);

  auto empty = store_->Put("put/empty", std::string_view(), PutOptions{});
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->size, 0u);
}

// The body is damaged after its Content-MD5 was computed (and before the SigV4 payload hash, so
// the signature still holds). Swift checks the digest and refuses it (BadDigest, retryable: a
// resent body may arrive whole); s3rver does not check and stores the damaged bytes.
TEST_P(S3WriteTest, BodyDamagedAfterItsContentMd5IsRefused) {
  std::string damaged;
  auto store = Open([&](S3StoreOptions& o) {
    o.before_signing = [&](HttpRequest& request) {
      if (request.body.empty()) return;
      damaged.assign(request.body.data(), request.body.size());
      damaged[damaged.size() / 2] ^= 0x20;
      request.body = damaged;
    };
  });
  const std::string data = Bytes(4096, 2);
  auto put = store->Put("damaged/put.bin", data, PutOptions{});
  if (!swift()) {
    EXPECT_TRUE(put.ok()) << "s3rver now checks Content-MD5: " << put.status().ToString();
    return;
  }
  ASSERT_FALSE(put.ok()) << "the server took a body that does not match its Content-MD5";
  EXPECT_EQ(put.status().code(), StatusCode::kUnavailable) << put.status().ToString();
  EXPECT_NE(put.status().message().find("BadDigest"), std::string::npos) << put.status().ToString();
  EXPECT_EQ(store_->Head("damaged/put.bin", IoOptions{}).status().code(), StatusCode::kNotFound);

  auto id = store_->CreateMultipartUpload("damaged/mp.bin", IoOptions{});
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto part = store->UploadPart("damaged/mp.bin", *id, 1, data, IoOptions{});
  EXPECT_FALSE(part.ok()) << "the server took a part that does not match its Content-MD5";
  EXPECT_TRUE(store_->AbortMultipartUpload("damaged/mp.bin", *id, IoOptions{}).ok());
}

// Twelve parts of growing sizes, 5 MiB and up but the last. Swift names the part count in the
// ETag (S3's "<md5 of part md5s>-12"); s3rver gives a plain MD5 of the whole object.
TEST_P(S3WriteTest, TwelvePartUploadReadsBackEqual) {
  std::vector<uint64_t> sizes;
  for (int i = 0; i < 11; ++i) sizes.push_back(kMinPartSize + i * 64 * 1024 + i);
  sizes.push_back(1000);
  uint64_t total = 0;
  for (uint64_t s : sizes) total += s;
  const std::string data = Bytes(total, 3);
  const std::string key = "mp/twelve.bin";

  auto id = store_->CreateMultipartUpload(key, IoOptions{});
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  std::vector<int> order = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  auto parts = UploadParts(*store_, key, *id, data, sizes, order);
  auto done = store_->CompleteMultipartUpload(key, *id, parts, IoOptions{});
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->size, total);
  auto head = store_->Head(key, IoOptions{});
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(head->size, total);
  EXPECT_EQ(head->etag, done->etag);
  if (swift()) {
    EXPECT_EQ(done->etag, MultipartEtag(parts));
    EXPECT_TRUE(done->etag.ends_with("-12")) << done->etag;
  } else {
    EXPECT_EQ(done->etag, Md5Hex(data)) << "s3rver's multipart ETag is no longer a plain MD5";
  }
  EXPECT_EQ(ReadAll(*store_, key, total), data);
  if (swift()) {
    EXPECT_FALSE(Pending("mp/", *id));
  }
}

TEST_P(S3WriteTest, PartsUploadedOutOfOrderJoinInPartOrder) {
  std::vector<uint64_t> sizes = {kMinPartSize, kMinPartSize + 1, 10};
  const std::string data = Bytes(2 * kMinPartSize + 11, 4);
  const std::string key = "mp/unordered.bin";
  auto id = store_->CreateMultipartUpload(key, IoOptions{});
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto parts = UploadParts(*store_, key, *id, data, sizes, {3, 1, 2});
  auto done = store_->CompleteMultipartUpload(key, *id, parts, IoOptions{});
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(ReadAll(*store_, key, data.size()), data);
}

// S3 refuses parts below 5 MiB but the last (EntityTooSmall) at Complete. Swift enforces it;
// s3rver does not and joins them.
TEST_P(S3WriteTest, MinimumPartSizePerServer) {
  const std::string data = Bytes(3000, 5);
  const std::string key = "mp/small-parts.bin";
  auto id = store_->CreateMultipartUpload(key, IoOptions{});
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto parts = UploadParts(*store_, key, *id, data, {1000, 1000, 1000}, {1, 2, 3});
  auto done = store_->CompleteMultipartUpload(key, *id, parts, IoOptions{});
  if (swift()) {
    ASSERT_FALSE(done.ok());
    EXPECT_EQ(done.status().code(), StatusCode::kInvalidArgument) << done.status().ToString();
    EXPECT_NE(done.status().message().find("EntityTooSmall"), std::string::npos)
        << done.status().ToString();
    EXPECT_TRUE(store_->AbortMultipartUpload(key, *id, IoOptions{}).ok());
  } else {
    ASSERT_TRUE(done.ok()) << "s3rver now enforces the minimum part size: "
                           << done.status().ToString();
    EXPECT_EQ(ReadAll(*store_, key, data.size()), data);
  }
}

TEST_P(S3WriteTest, AbortLeavesNoObjectAndNoPendingUpload) {
  const std::string key = "abort/gone.bin";
  auto id = store_->CreateMultipartUpload(key, IoOptions{});
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  UploadParts(*store_, key, *id, Bytes(100, 6), {100}, {1});
  if (!swift()) {
    EXPECT_EQ(store_->AbortMultipartUpload(key, *id, IoOptions{}).code(),
              StatusCode::kUnimplemented);
    return;
  }
  EXPECT_TRUE(Pending("abort/", *id));
  Status aborted = store_->AbortMultipartUpload(key, *id, IoOptions{});
  ASSERT_TRUE(aborted.ok()) << aborted.ToString();
  EXPECT_FALSE(Pending("abort/", *id));
  EXPECT_EQ(store_->Head(key, IoOptions{}).status().code(), StatusCode::kNotFound);
  // Aborting again (a repeat whose first attempt was done) is OK.
  Status again = store_->AbortMultipartUpload(key, *id, IoOptions{});
  EXPECT_TRUE(again.ok()) << again.ToString();
  // Completing an aborted upload is NoSuchUpload.
  auto done =
      store_->CompleteMultipartUpload(key, *id, {{1, Md5Hex(Bytes(100, 6)), 100}}, IoOptions{});
  ASSERT_FALSE(done.ok());
  EXPECT_EQ(done.status().code(), StatusCode::kNotFound) << done.status().ToString();
}

TEST_P(S3WriteTest, ListMultipartUploadsFindsAnUploadLeftBehindByPrefix) {
  auto left = store_->CreateMultipartUpload("left/behind.bin", IoOptions{});
  auto other = store_->CreateMultipartUpload("elsewhere/x.bin", IoOptions{});
  ASSERT_TRUE(left.ok() && other.ok()) << left.status().ToString() << other.status().ToString();
  auto uploads = store_->ListMultipartUploads("left/", IoOptions{});
  if (!swift()) {
    EXPECT_EQ(uploads.status().code(), StatusCode::kUnimplemented) << uploads.status().ToString();
    return;
  }
  ASSERT_TRUE(uploads.ok()) << uploads.status().ToString();
  ASSERT_EQ(uploads->size(), 1u);
  EXPECT_EQ((*uploads)[0].key, "left/behind.bin");
  EXPECT_EQ((*uploads)[0].upload_id, *left);
  EXPECT_GT((*uploads)[0].initiated, 0);
  for (const PendingUpload& u : *uploads) {
    EXPECT_TRUE(store_->AbortMultipartUpload(u.key, u.upload_id, IoOptions{}).ok());
  }
  EXPECT_TRUE(store_->AbortMultipartUpload("elsewhere/x.bin", *other, IoOptions{}).ok());
}

TEST_P(S3WriteTest, CopyOfASmallObject) {
  const std::string data = Bytes(12345, 7);
  ASSERT_TRUE(store_->Put("copy/src.bin", data, PutOptions{}).ok());
  auto copy = store_->Copy("copy/src.bin", "copy/dst with space+plus.bin", IoOptions{});
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ(copy->size, data.size());
  auto head = store_->Head("copy/dst with space+plus.bin", IoOptions{});
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(head->etag, copy->etag);
  EXPECT_EQ(ReadAll(*store_, "copy/dst with space+plus.bin", data.size()), data);

  auto missing = store_->Copy("copy/none", "copy/dst2", IoOptions{});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().ToString();
}

// With the threshold lowered, an object above it is copied by UploadPartCopy ranges.
TEST_P(S3WriteTest, CopyAboveTheThresholdGoesPartByPart) {
  auto store = Open([](S3StoreOptions& o) {
    o.multipart_copy_threshold = 6 * kMiB;
    o.copy_part_size = kMinPartSize;
  });
  const std::string data = Bytes(2 * kMinPartSize + 3 * kMiB + 5, 8);
  ASSERT_TRUE(store->Put("copy/big-src.bin", data, PutOptions{}).ok());
  auto copy = store->Copy("copy/big-src.bin", "copy/big-dst.bin", IoOptions{});
  if (!swift()) {
    EXPECT_EQ(copy.status().code(), StatusCode::kUnimplemented) << copy.status().ToString();
    return;
  }
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ(copy->size, data.size());
  if (swift()) {
    EXPECT_TRUE(copy->etag.ends_with("-3")) << copy->etag;
  }
  auto head = store->Head("copy/big-dst.bin", IoOptions{});
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(head->etag, copy->etag);
  EXPECT_EQ(ReadAll(*store, "copy/big-dst.bin", data.size()), data);
  auto uploads = store->ListMultipartUploads("copy/", IoOptions{});
  ASSERT_TRUE(uploads.ok()) << uploads.status().ToString();
  EXPECT_TRUE(uploads->empty()) << "an upload was left behind";
}

TEST_P(S3WriteTest, DeleteOfAMissingKeyIsOk) {
  ASSERT_TRUE(store_->Put("del/x", std::string_view("x"), PutOptions{}).ok());
  ASSERT_TRUE(store_->Delete("del/x", IoOptions{}).ok());
  EXPECT_EQ(store_->Head("del/x", IoOptions{}).status().code(), StatusCode::kNotFound);
  Status again = store_->Delete("del/x", IoOptions{});
  EXPECT_TRUE(again.ok()) << again.ToString();
  Status never = store_->Delete("del/never-was", IoOptions{});
  EXPECT_TRUE(never.ok()) << never.ToString();
}

// If-None-Match: * on a Put ("create only"): s3rver ignores the header and overwrites; Swift's
// s3api refuses it (501 "Conditional object PUTs are not supported": kUnimplemented).
TEST_P(S3WriteTest, CreateOnlyPutPerServer) {
  PutOptions create_only;
  create_only.if_none_match = true;
  auto first = store_->Put("once/k", std::string_view("first"), create_only);
  if (swift()) {
    ASSERT_FALSE(first.ok()) << "Swift now takes If-None-Match: update PutOptions";
    EXPECT_EQ(first.status().code(), StatusCode::kUnimplemented) << first.status().ToString();
    EXPECT_EQ(store_->Head("once/k", IoOptions{}).status().code(), StatusCode::kNotFound);
    return;
  }
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = store_->Put("once/k", std::string_view("second"), create_only);
  EXPECT_TRUE(second.ok()) << "s3rver now honours If-None-Match: update PutOptions";
  EXPECT_EQ(ReadAll(*store_, "once/k", 16), "second");
}

// A store error names the bucket and the key.
TEST_P(S3WriteTest, MissingBucketErrorNamesBucketAndKey) {
  auto store = Open([](S3StoreOptions& o) { o.bucket = "no-such-bucket-w"; });
  auto put = store->Put("a/b.txt", std::string_view("x"), PutOptions{});
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.status().code(), StatusCode::kNotFound) << put.status().ToString();
  EXPECT_NE(put.status().message().find("s3://no-such-bucket-w/a/b.txt"), std::string::npos)
      << put.status().ToString();
  Status del = store->Delete("a/b.txt", IoOptions{});
  EXPECT_EQ(del.code(), StatusCode::kNotFound) << del.ToString();
  auto id = store->CreateMultipartUpload("a/b.txt", IoOptions{});
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("no-such-bucket-w"), std::string::npos)
      << id.status().ToString();
}

// The first Complete succeeds but its reply is lost (a 503 instead): the repeat finds the upload
// gone (NoSuchUpload) and accepts the object because its ETag is the one these parts make.
// s3rver answers a repeated Complete with HTTP 500, so there the retries run out (kUnavailable);
// the object is whole either way.
TEST_P(S3WriteTest, CompleteRepeatedAfterALostReply) {
  auto faults = std::make_shared<FaultInjectingStore>(store_);
  RetryPolicy policy;
  policy.initial_backoff = std::chrono::milliseconds(1);
  RetryingStore retrying(faults, policy);
  const std::string data = Bytes(kMinPartSize + 10, 9);
  const std::string key = "lost/complete.bin";
  auto id = retrying.CreateMultipartUpload(key, IoOptions{});
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto parts = UploadParts(retrying, key, *id, data, {kMinPartSize, 10}, {1, 2});
  FaultRule lost;
  lost.op = StoreOp::kCompleteUpload;
  lost.status = faults->ServerError(key);
  lost.times = 1;
  lost.after_call = true;
  faults->AddRule(lost);
  auto done = retrying.CompleteMultipartUpload(key, *id, parts, IoOptions{});
  if (swift()) {
    ASSERT_TRUE(done.ok()) << done.status().ToString();
    EXPECT_EQ(done->etag, MultipartEtag(parts));
    EXPECT_EQ(done->size, data.size());
    EXPECT_EQ(faults->Calls(StoreOp::kCompleteUpload), 2);
  } else {
    ASSERT_FALSE(done.ok());
    EXPECT_EQ(done.status().code(), StatusCode::kUnavailable) << done.status().ToString();
    EXPECT_EQ(faults->Calls(StoreOp::kCompleteUpload), policy.max_attempts);
  }
  EXPECT_EQ(ReadAll(*store_, key, data.size()), data);
}

INSTANTIATE_TEST_SUITE_P(Servers, S3WriteTest, ::testing::Values("s3rver", "swift"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace lakecache::s3_write_test
