#include "meta/block_fetch.h"

#include <gtest/gtest.h>

#include <thread>

#include "support/test_servers.h"
#include "ufs/fault_injecting_store.h"
#include "ufs/local_store.h"

namespace lakecache {
namespace {

constexpr uint64_t kBlock = 64 << 10;

class BlockRunFetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    content_.resize(5 * kBlock + 123);
    for (size_t i = 0; i < content_.size(); ++i) content_[i] = static_cast<char>(i * 7 + i / 999);
    local_ = std::make_shared<LocalStore>(dir_.path());
    ASSERT_TRUE(local_->Put("obj", content_, IoOptions{}).ok());
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

}  // namespace
}  // namespace lakecache
