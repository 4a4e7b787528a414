#include "fetch/block_fetch.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <cstdio>
#include <ctime>
#include <thread>

#include "cache/block_store.h"
#include "support/fake_clock.h"
#include "support/test_servers.h"
#include "ufs/fault_injecting_store.h"
#include "ufs/local_store.h"
#include "ufs/retrying_store.h"

namespace lakecache {
namespace {

constexpr uint64_t kBlock = 64 << 10;

class BlockRunFetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    content_.resize(5 * kBlock + 123);
    for (size_t i = 0; i < content_.size(); ++i) content_[i] = static_cast<char>(i * 7 + i / 999);
    local_ = std::make_shared<LocalStore>(dir_.path());
    ASSERT_TRUE(local_->Put("obj", content_, PutOptions{}).ok());
    store_ = std::make_shared<FaultInjectingStore>(local_);
  }

  BlockRequest Request(uint64_t index) const {
    BlockRequest r;
    r.key = BlockKey{ContentId{1, 2}, index};
    r.object_key = "obj";
    r.offset = index * kBlock;
    r.length = std::min<uint64_t>(kBlock, content_.size() - r.offset);
    return r;
  }

  // The request as a reader of the version stored now makes it: ETag and size named.
  BlockRequest VersionedRequest(uint64_t index) const {
    BlockRequest r = Request(index);
    Result<ObjectInfo> info = local_->Head("obj", IoOptions{});
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    r.etag = info.ok() ? info->etag : "";
    r.object_size = content_.size();
    return r;
  }

  static void ExpectChanged(const Result<BlockRef>& block) {
    ASSERT_FALSE(block.ok());
    EXPECT_EQ(block.status().code(), StatusCode::kPreconditionFailed) << block.status().ToString();
    EXPECT_NE(block.status().message().find("changed"), std::string::npos);
  }

  void ExpectBlock(const Result<BlockRef>& block, uint64_t index) const {
    ASSERT_TRUE(block.ok()) << block.status().ToString();
    BlockRequest r = Request(index);
    EXPECT_EQ(std::string((*block)->data(), (*block)->size()), content_.substr(r.offset, r.length));
  }

  testing::TempDir dir_;
  std::string content_;
  std::shared_ptr<LocalStore> local_;
  std::shared_ptr<FaultInjectingStore> store_;
};

TEST_F(BlockRunFetchTest, MembersFetchedConcurrentlyShareOneRead) {
  BlockRunFetch run(store_.get());
  for (uint64_t i = 2; i < 6; ++i) run.Add(Request(i));  // the last block is short
  std::vector<Result<BlockRef>> got(4, Status::Internal("unset"));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] { got[t] = run.Get(Request(2 + t)); });
  }
  run.Seal();  // members wait for the seal, so the read covers all four
  for (auto& t : threads) t.join();
  for (int t = 0; t < 4; ++t) ExpectBlock(got[t], 2 + t);
  EXPECT_EQ(store_->Calls(StoreOp::kRead), 1);
}

// A read-ahead binds its source to the run before it knows whether the block joins it: a block a
// lower tier held is left out, and if that tier loses it before the prefetch runs, the source is
// asked for it after all, perhaps from a run with no member (this once crashed a mount's server).
TEST_F(BlockRunFetchTest, ABlockLeftOutOfAnEmptyRunIsFetchedAlone) {
  BlockRunFetch run(store_.get());
  run.Seal();
  ExpectBlock(run.Get(Request(3)), 3);
  EXPECT_EQ(store_->Calls(StoreOp::kRead), 1);
}

TEST_F(BlockRunFetchTest, ABlockLeftOutOfARunIsFetchedAloneAndTheRunStillOnce) {
  BlockRunFetch run(store_.get());
  run.Add(Request(0));
  run.Add(Request(1));
  run.Seal();
  ExpectBlock(run.Get(Request(4)), 4);
  EXPECT_EQ(store_->Calls(StoreOp::kRead), 1);
  ExpectBlock(run.Get(Request(0)), 0);
  ExpectBlock(run.Get(Request(1)), 1);
  EXPECT_EQ(store_->Calls(StoreOp::kRead), 2);
}

TEST_F(BlockRunFetchTest, ErrorReachesEveryMember) {
  store_->FailNext(StoreOp::kRead, store_->ServerError("obj"));
  BlockRunFetch run(store_.get());
  run.Add(Request(0));
  run.Add(Request(1));
  run.Seal();
  EXPECT_EQ(run.Get(Request(0)).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(run.Get(Request(1)).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store_->Calls(StoreOp::kRead), 1);
}

TEST_F(BlockRunFetchTest, ObjectShorterThanListedIsAnError) {
  BlockRunFetch run(store_.get());
  BlockRequest past = Request(5);
  past.length = kBlock;  // the listing promised a whole block; the object has 123 bytes there
  run.Add(past);
  run.Seal();
  Result<BlockRef> got = run.Get(past);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("shorter than listed"), std::string::npos);
}

// A server that ignores If-Match sends the bytes of the object it has now: the reply's ETag says
// so.
TEST_F(BlockRunFetchTest, FetchBlockDropsAReplyOfAnotherEtag) {
  store_->ReplyWithVersion("etag-of-a-newer-version", std::nullopt, 1);
  ExpectChanged(FetchBlock(*store_, VersionedRequest(1)));
  ExpectBlock(FetchBlock(*store_, VersionedRequest(1)), 1);  // the rule is spent
}

TEST_F(BlockRunFetchTest, FetchBlockDropsAReplyOfAnotherTotalSize) {
  BlockRequest r = VersionedRequest(0);
  store_->ReplyWithVersion(r.etag, content_.size() + 1, 1);  // Content-Range: .../total+1
  ExpectChanged(FetchBlock(*store_, r));
}

TEST_F(BlockRunFetchTest, ReplyWithoutVersionIsTakenAsIs) {
  store_->ReplyWithVersion("", ReadReply::kUnknownSize, 1);  // no ETag header, total "*"
  ExpectBlock(FetchBlock(*store_, VersionedRequest(2)), 2);
}

TEST_F(BlockRunFetchTest, RunFetchDropsEveryMemberOfAReplyOfAnotherVersion) {
  store_->ReplyWithVersion("etag-of-a-newer-version", std::nullopt, 1);
  BlockRunFetch run(store_.get());
  for (uint64_t i = 0; i < 3; ++i) run.Add(VersionedRequest(i));
  run.Seal();
  for (uint64_t i = 0; i < 3; ++i) ExpectChanged(run.Get(VersionedRequest(i)));
  EXPECT_EQ(store_->Calls(StoreOp::kRead), 1);
}

TEST_F(BlockRunFetchTest, RunFetchDropsAReplyOfAnotherTotalSize) {
  store_->ReplyWithVersion(VersionedRequest(0).etag, content_.size() - 1, 1);
  BlockRunFetch run(store_.get());
  run.Add(VersionedRequest(0));
  run.Add(VersionedRequest(1));
  run.Seal();
  ExpectChanged(run.Get(VersionedRequest(0)));
  ExpectChanged(run.Get(VersionedRequest(1)));
}

// Another version is a final answer: retrying cannot bring the old one back.
TEST_F(BlockRunFetchTest, ChangedObjectIsNotRetried) {
  store_->ReplyWithVersion("etag-of-a-newer-version", std::nullopt);
  testing::FakeClock clock;  // the retry it must not make would not wait
  RetryPolicy policy;
  policy.clock = &clock;
  RetryingStore retrying(store_, policy);
  ExpectChanged(FetchBlock(retrying, VersionedRequest(0)));
  EXPECT_EQ(store_->Calls(StoreOp::kRead), 1);
}

TEST_F(BlockRunFetchTest, BlockOfAnotherVersionIsNeverCached) {
  CacheConfig config;
  config.memory_capacity = 16 * kBlock;
  auto blocks = BlockStore::Open(config);
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  BlockRequest r = VersionedRequest(3);
  auto source = [this](const BlockRequest& req) { return FetchBlock(*store_, req); };
  store_->ReplyWithVersion("etag-of-a-newer-version", std::nullopt, 1);
  ExpectChanged((*blocks)->Get(r, source));
  EXPECT_FALSE((*blocks)->Contains(r.key));
  ExpectBlock((*blocks)->Get(r, source), 3);  // fetched again, of the version named
  EXPECT_TRUE((*blocks)->Contains(r.key));
}

// A local file has no ETag on a read: the reply names the version (size, mtime) it has after it.
TEST_F(BlockRunFetchTest, LocalReplyNamesTheFileVersion) {
  BlockRequest r = VersionedRequest(0);
  std::string bytes(r.length, '\0');
  ReadOptions options;
  options.if_match = r.etag;
  Result<ReadReply> reply = local_->ReadRaw("obj", 0, std::vector<std::span<char>>{bytes}, options);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->etag, r.etag);
  EXPECT_EQ(reply->object_size, content_.size());
  EXPECT_EQ(reply->bytes, r.length);
}

// Rewritten in place (same size, other bytes, later mtime) after the reader named its version.
TEST_F(BlockRunFetchTest, LocalFileRewrittenInPlaceIsAnotherVersion) {
  BlockRequest r = VersionedRequest(1);
  std::string path = dir_.path() + "/obj";
  std::string other(content_.size(), 'B');
  FILE* f = std::fopen(path.c_str(), "r+");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(other.data(), 1, other.size(), f), other.size());
  std::fclose(f);
  struct timespec later[2] = {{0, UTIME_OMIT}, {std::time(nullptr) + 5, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), later, 0), 0);
  ExpectChanged(FetchBlock(*store_, r));
}

}  // namespace
}  // namespace lakecache
