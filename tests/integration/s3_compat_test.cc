// The S3 store against real servers: s3rver (lenient, fast) and OpenStack Swift with s3api
// (verifies SigV4, strict paging and ranges). Every case runs against both.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "common/config.h"
#include "support/test_servers.h"
#include "ufs/s3_store.h"
#include "ufs/store_factory.h"

// Its own namespace: the files of integration_tests are compiled in unity batches.
namespace lakecache::s3_compat_test {
namespace {

using testing::S3Server;

constexpr char kBucket[] = "lc-test";
constexpr size_t kBigSize = 3 * 65536 + 17;

const std::vector<std::string> kSpecialKeys = {"special/with space.txt", "special/ünïcødé-файл.txt",
                                               "special/a+b.txt", "special/100%.txt",
                                               "special/semi;colon=eq&amp.txt"};

std::string BigContent() {
  std::string s(kBigSize, '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>((i * 31 + i / 251) & 0xff);
  return s;
}

std::vector<std::pair<std::string, std::string>> Dataset() {
  std::vector<std::pair<std::string, std::string>> objects;
  char name[32];
  for (int i = 0; i < 1100; ++i) {
    std::snprintf(name, sizeof(name), "many/k%04d", i);
    objects.emplace_back(name, "v" + std::to_string(i));
  }
  for (int i = 0; i < 5; ++i) objects.emplace_back("page/p" + std::to_string(i), "page");
  for (const char* k :
       {"tree/a/b/c.txt", "tree/a/b/d.txt", "tree/a/e.txt", "tree/a/f/g.txt", "tree/z.txt"}) {
    objects.emplace_back(k, k);
  }
  objects.emplace_back("blob/big.bin", BigContent());
  objects.emplace_back("blob/empty", "");
  for (const auto& k : kSpecialKeys) objects.emplace_back(k, "content of " + k);
  return objects;
}

// One seeded server of each kind per test program, started on first use.
S3Server& Server(const std::string& kind) {
  static std::set<std::string> seeded;
  S3Server& server = testing::SharedS3Server(kind, {kBucket});
  if (seeded.insert(kind).second) {
    Status s = server.PutObjects(kBucket, Dataset());
    if (!s.ok()) {
      ADD_FAILURE() << kind << " seeding failed: " << s.ToString();
      std::abort();
    }
  }
  return server;
}

std::shared_ptr<ObjectStore> OpenStore(const S3Server& server, const std::string& bucket,
                                       const std::string& secret) {
  NamespaceConfig ns;
  ns.name = "test";
  ns.location.bucket = bucket;
  ns.endpoint = server.endpoint();
  ns.region = server.region();
  ns.path_style = true;
  Credentials creds{server.access_key(), Secret(secret), Secret(), "test"};
  StoreOptions options;
  options.retry.max_attempts = 2;
  auto store = OpenObjectStore(ns, creds, options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? *store : nullptr;
}

class S3CompatTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    server_ = &Server(GetParam());
    store_ = OpenStore(*server_, kBucket, server_->secret_key());
    ASSERT_NE(store_, nullptr);
  }

  std::string ReadRange(const std::string& key, uint64_t offset, size_t len) {
    std::string buf(len, '\0');
    auto n = store_->Read(key, offset, std::span<char>(buf.data(), buf.size()), ReadOptions{});
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    buf.resize(n.ok() ? *n : 0);
    return buf;
  }

  S3Server* server_ = nullptr;
  std::shared_ptr<ObjectStore> store_;
};

TEST_P(S3CompatTest, ListsMoreThan1000KeysAcrossPages) {
  ListRequest req;
  req.prefix = "many/";
  auto first = store_->List(req, IoOptions{});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->truncated);
  EXPECT_EQ(first->objects.size(), 1000u);
  EXPECT_FALSE(first->next_token.empty());

  auto all = ListAll(*store_, "many/", "", IoOptions{});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->objects.size(), 1100u);
  EXPECT_EQ(all->objects.front().key, "many/k0000");
  EXPECT_EQ(all->objects.back().key, "many/k1099");
  EXPECT_EQ(all->objects[42].size, 3u);  // "v42"
}

TEST_P(S3CompatTest, MaxKeys2ContinuationVisitsEveryKeyOnce) {
  ListRequest req;
  req.prefix = "page/";
  req.max_keys = 2;
  std::vector<std::string> keys;
  int pages = 0;
  for (;;) {
    auto page = store_->List(req, IoOptions{});
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    ASSERT_LE(page->objects.size(), 2u);
    for (const auto& o : page->objects) keys.push_back(o.key);
    ++pages;
    ASSERT_LT(pages, 10) << "pagination does not end";
    if (!page->truncated) break;
    req.continuation_token = page->next_token;
  }
  EXPECT_EQ(keys,
            (std::vector<std::string>{"page/p0", "page/p1", "page/p2", "page/p3", "page/p4"}));
  EXPECT_GE(pages, 3);
}

TEST_P(S3CompatTest, DelimiterGroupsNestedPrefixes) {
  auto level = ListAll(*store_, "tree/a/", "/", IoOptions{});
  ASSERT_TRUE(level.ok()) << level.status().ToString();
  ASSERT_EQ(level->objects.size(), 1u);
  EXPECT_EQ(level->objects[0].key, "tree/a/e.txt");
  EXPECT_EQ(level->common_prefixes, (std::vector<std::string>{"tree/a/b/", "tree/a/f/"}));

  auto top = ListAll(*store_, "tree/", "/", IoOptions{});
  ASSERT_TRUE(top.ok()) << top.status().ToString();
  ASSERT_EQ(top->objects.size(), 1u);
  EXPECT_EQ(top->objects[0].key, "tree/z.txt");
  EXPECT_EQ(top->common_prefixes, (std::vector<std::string>{"tree/a/"}));
}

TEST_P(S3CompatTest, PagedDelimiterListingHasNoDuplicates) {
  ListRequest req;
  req.prefix = "tree/a/";
  req.delimiter = "/";
  req.max_keys = 1;
  std::multiset<std::string> seen;
  for (int pages = 0; pages < 20; ++pages) {
    auto page = store_->List(req, IoOptions{});
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    for (const auto& o : page->objects) seen.insert(o.key);
    for (const auto& p : page->common_prefixes) seen.insert(p);
    if (!page->truncated) break;
    req.continuation_token = page->next_token;
  }
  // Raw pages may repeat prefixes (s3rver does); ListAll must not.
  std::set<std::string> unique(seen.begin(), seen.end());
  EXPECT_EQ(unique, (std::set<std::string>{"tree/a/b/", "tree/a/e.txt", "tree/a/f/"}));
}

TEST_P(S3CompatTest, RangedReadsAtBlockBoundaries) {
  const std::string big = BigContent();
  const std::pair<uint64_t, size_t> ranges[] = {{0, 65536},      {65535, 2},   {65536, 65536},
                                                {131071, 65537}, {196608, 17}, {0, kBigSize}};
  for (const auto& [offset, len] : ranges) {
    SCOPED_TRACE("offset " + std::to_string(offset) + " len " + std::to_string(len));
    EXPECT_EQ(ReadRange("blob/big.bin", offset, len), big.substr(offset, len));
  }
  // Past the end: short, then empty.
  EXPECT_EQ(ReadRange("blob/big.bin", kBigSize - 5, 100), big.substr(kBigSize - 5));
  EXPECT_EQ(ReadRange("blob/big.bin", kBigSize, 10), "");
  EXPECT_EQ(ReadRange("blob/big.bin", kBigSize + 1000, 10), "");

  auto info = store_->Head("blob/big.bin", IoOptions{});
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->size, kBigSize);
  EXPECT_FALSE(info->etag.empty());
  EXPECT_GT(info->mtime, 0);
}

// One request fills several consecutive buffers (neighbouring cache blocks), short at the end.
TEST_P(S3CompatTest, ReadVFillsConsecutiveBuffersInOneRange) {
  const std::string big = BigContent();
  std::string a(65536, '\0'), b(65536, '\0'), c(200000, '\0');
  std::span<char> bufs[] = {a, b, c};
  auto n = store_->ReadV("blob/big.bin", 1000, bufs, ReadOptions{});
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  ASSERT_EQ(*n, kBigSize - 1000);
  EXPECT_EQ(a, big.substr(1000, 65536));
  EXPECT_EQ(b, big.substr(1000 + 65536, 65536));
  EXPECT_EQ(c.substr(0, kBigSize - 1000 - 2 * 65536), big.substr(1000 + 2 * 65536));
}

// The reply names its version: the ETag the listing gives and the total of its Content-Range.
TEST_P(S3CompatTest, ReadReplyNamesTheVersionItCameFrom) {
  auto listing = ListAll(*store_, "blob/", "/", IoOptions{});
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  const ObjectInfo& big = listing->objects[0];
  ASSERT_EQ(big.key, "blob/big.bin");
  std::string buf(1000, '\0');
  std::span<char> one[] = {buf};
  auto reply = store_->ReadRaw(big.key, 500, one, ReadOptions{});
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->bytes, buf.size());
  EXPECT_EQ(reply->etag, big.etag);
  EXPECT_EQ(reply->object_size, kBigSize);
  ReadOptions version;
  version.if_match = big.etag;
  version.object_size = big.size;
  EXPECT_TRUE(store_->Read(big.key, 500, buf, version).ok());
}

// Swift answers a stale If-Match with 412; s3rver ignores If-Match and sends the bytes, whose ETag
// gives them away. Either way the reader gets kPreconditionFailed, never the bytes.
TEST_P(S3CompatTest, ReadOfAnotherVersionIsPreconditionFailed) {
  std::string buf(1000, '\0');
  ReadOptions stale;
  stale.if_match = "0123456789abcdef0123456789abcdef";
  stale.object_size = kBigSize;
  auto n = store_->Read("blob/big.bin", 0, buf, stale);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kPreconditionFailed) << n.status().ToString();

  auto info = store_->Head("blob/big.bin", IoOptions{});
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  ReadOptions other_size;
  other_size.if_match = info->etag;
  other_size.object_size = kBigSize + 1;  // the Content-Range total says otherwise
  n = store_->Read("blob/big.bin", 0, buf, other_size);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kPreconditionFailed) << n.status().ToString();
  EXPECT_NE(n.status().message().find("expected " + std::to_string(kBigSize + 1)),
            std::string::npos)
      << n.status().ToString();
}

TEST_P(S3CompatTest, ZeroByteObject) {
  auto info = store_->Head("blob/empty", IoOptions{});
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->size, 0u);
  EXPECT_EQ(ReadRange("blob/empty", 0, 10), "");
  auto listing = ListAll(*store_, "blob/", "/", IoOptions{});
  ASSERT_TRUE(listing.ok());
  ASSERT_EQ(listing->objects.size(), 2u);
  EXPECT_EQ(listing->objects[1].key, "blob/empty");
  EXPECT_EQ(listing->objects[1].size, 0u);
}

TEST_P(S3CompatTest, KeysWithSpacesUnicodePlusAndPercent) {
  auto listing = ListAll(*store_, "special/", "", IoOptions{});
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  std::set<std::string> listed;
  for (const auto& o : listing->objects) listed.insert(o.key);
  EXPECT_EQ(listed, std::set<std::string>(kSpecialKeys.begin(), kSpecialKeys.end()));
  for (const auto& key : kSpecialKeys) {
    SCOPED_TRACE(key);
    std::string want = "content of " + key;
    auto info = store_->Head(key, IoOptions{});
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(info->size, want.size());
    EXPECT_EQ(ReadRange(key, 0, want.size() + 10), want);
  }
}

TEST_P(S3CompatTest, MissingKeyIsNotFoundNamingBucketKeyAndStatus) {
  auto info = store_->Head("nope/missing.txt", IoOptions{});
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kNotFound);
  EXPECT_NE(info.status().message().find("s3://lc-test/nope/missing.txt"), std::string::npos)
      << info.status().message();
  EXPECT_NE(info.status().message().find("404"), std::string::npos) << info.status().message();

  char buf[8];
  auto read = store_->Read("nope/missing.txt", 0, buf, ReadOptions{});
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kNotFound);
}

TEST_P(S3CompatTest, MissingBucketIsNotFound) {
  auto store = OpenStore(*server_, "no-such-bucket-here", server_->secret_key());
  auto listing = store->List(ListRequest{}, IoOptions{});
  ASSERT_FALSE(listing.ok());
  EXPECT_EQ(listing.status().code(), StatusCode::kNotFound) << listing.status().ToString();
  EXPECT_NE(listing.status().message().find("no-such-bucket-here"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Servers, S3CompatTest, ::testing::Values("s3rver", "swift"),
                         [](const auto& param_info) { return param_info.param; });

// Swift verifies signatures: a wrong secret is refused, and the message names the key id only.
TEST(SwiftSignatureTest, WrongSecretIsAccessDeniedNamingKeyIdNotSecret) {
  S3Server& server = Server("swift");
  const std::string wrong = "wrong-secret-3f9a";
  auto store = OpenStore(server, kBucket, wrong);
  auto listing = store->List(ListRequest{}, IoOptions{});
  ASSERT_FALSE(listing.ok());
  EXPECT_EQ(listing.status().code(), StatusCode::kAccessDenied);
  const std::string& msg = listing.status().message();
  EXPECT_NE(msg.find("access denied"), std::string::npos) << msg;
  EXPECT_NE(msg.find("test:tester"), std::string::npos) << msg;
  EXPECT_EQ(msg.find(wrong), std::string::npos) << msg;
}

// Swift honours If-Match: a read pinned to an old ETag fails instead of mixing versions.
TEST(SwiftSignatureTest, ReadPinnedToStaleEtagIsPreconditionFailed) {
  S3Server& server = Server("swift");
  auto store = OpenStore(server, kBucket, server.secret_key());
  ReadOptions options;
  options.if_match = "0123456789abcdef0123456789abcdef";
  char buf[16];
  auto read = store->Read("tree/z.txt", 0, buf, options);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kPreconditionFailed) << read.status().ToString();
}

}  // namespace
}  // namespace lakecache::s3_compat_test
