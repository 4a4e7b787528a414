#include "ufs/retrying_store.h"

#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/fake_clock.h"
#include "support/slowdown.h"
#include "ufs/fault_injecting_store.h"
#include "ufs/local_store.h"

namespace lakecache {
namespace {

using std::chrono::milliseconds;

// RetryingStore -> FaultInjectingStore -> LocalStore on a fake clock: the backoff sleeps are
// recorded instead of slept, and advance the clock.
class RetryingStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "lakecache-retry-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    local_ = std::make_shared<LocalStore>(root_);
    ASSERT_TRUE(local_->Put("k", std::string_view("payload"), {}).ok());
    faults_ = std::make_shared<FaultInjectingStore>(local_);
    policy_.seed = 7;
    policy_.clock = &clock_;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  RetryingStore& Store() {
    if (!store_) store_ = std::make_unique<RetryingStore>(faults_, policy_);
    return *store_;
  }

  Result<size_t> Read(const std::string& key, const ReadOptions& options = {}) {
    buf_.assign(16, '\0');
    return Store().Read(key, 0, buf_, options);
  }

  std::vector<Clock::duration> Sleeps() const { return clock_.Sleeps(); }

  testing::FakeClock clock_;
  std::string root_;
  std::shared_ptr<LocalStore> local_;
  std::shared_ptr<FaultInjectingStore> faults_;
  RetryPolicy policy_;
  std::unique_ptr<RetryingStore> store_;
  std::string buf_;
};

TEST_F(RetryingStoreTest, BurstOfServerErrorsThenSuccess) {
  faults_->FailNext(StoreOp::kRead, faults_->ServerError("k"), 3);
  Result<size_t> n = Read("k");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(buf_.substr(0, *n), "payload");
  EXPECT_EQ(faults_->Calls(StoreOp::kRead), 4);
  EXPECT_EQ(Sleeps().size(), 3u);
}

TEST_F(RetryingStoreTest, AccessDeniedFailsAtOnce) {
  faults_->FailAlways(StoreOp::kHead, faults_->AccessDenied("k"));
  Result<ObjectInfo> info = Store().Head("k", {});
  EXPECT_EQ(info.status().code(), StatusCode::kAccessDenied);
  EXPECT_EQ(info.status().message(), faults_->AccessDenied("k").message());
  EXPECT_EQ(faults_->Calls(StoreOp::kHead), 1);
  EXPECT_TRUE(Sleeps().empty());
}

TEST_F(RetryingStoreTest, NotFoundFailsAtOnce) {
  EXPECT_EQ(Store().Head("missing", {}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(faults_->Calls(StoreOp::kHead), 1);
  faults_->FailNext(StoreOp::kRead, faults_->NotFound("k"));
  EXPECT_EQ(Read("k").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(faults_->Calls(StoreOp::kRead), 1);
  EXPECT_TRUE(Sleeps().empty());
}

TEST_F(RetryingStoreTest, PreconditionFailedIsNotRetried) {
  ReadOptions opts;
  opts.if_match = "not-the-etag";
  EXPECT_EQ(Read("k", opts).status().code(), StatusCode::kPreconditionFailed);
  EXPECT_EQ(faults_->Calls(StoreOp::kRead), 1);
}

TEST_F(RetryingStoreTest, PersistentServerErrorStopsAfterMaxAttempts) {
  Status original = faults_->ServerError("k");
  faults_->FailAlways(StoreOp::kRead, original);
  Result<size_t> n = Read("k");
  EXPECT_EQ(n.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(n.status().message(), original.message() + " (after 5 attempts)");
  EXPECT_EQ(faults_->Calls(StoreOp::kRead), 5);
  EXPECT_EQ(Sleeps().size(), 4u);
}

TEST_F(RetryingStoreTest, DeadlineStopsRetriesEarly) {
  policy_.jitter = false;
  policy_.initial_backoff = milliseconds(10);
  policy_.max_attempts = 100;
  faults_->FailAlways(StoreOp::kRead, faults_->ServerError("k"));
  ReadOptions opts;
  opts.deadline = clock_.Now() + milliseconds(50);
  Result<size_t> n = Read("k", opts);
  EXPECT_EQ(n.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(n.status().message().find("HTTP 503 SlowDown"), std::string::npos);
  // Slept 10 + 20 ms; a 40 ms sleep would have ended past the deadline.
  EXPECT_EQ(Sleeps(), (std::vector<Clock::duration>{milliseconds(10), milliseconds(20)}));
  EXPECT_EQ(faults_->Calls(StoreOp::kRead), 3);
}

TEST_F(RetryingStoreTest, RealSleepsNeverPassTheDeadline) {
  policy_.clock = SteadyClock::Real();
  policy_.initial_backoff = milliseconds(5);
  policy_.max_attempts = 100;
  faults_->FailAlways(StoreOp::kHead, faults_->ConnectionReset("k"));
  Clock::time_point start = Clock::now();
  Result<ObjectInfo> info = Store().Head("k", IoOptions::WithTimeout(milliseconds(50)));
  EXPECT_EQ(info.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(info.status().message().find("Connection reset"), std::string::npos);
  // Retries that slept past the deadline would take minutes (the backoff doubles to 5 s); a second
  // leaves a busy host its slack.
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1) * testing::kSlowdown);
  EXPECT_GE(faults_->Calls(StoreOp::kHead), 1);
}

TEST_F(RetryingStoreTest, BackoffDoublesUpToTheCap) {
  policy_.jitter = false;
  policy_.max_attempts = 7;
  policy_.max_backoff = milliseconds(1000);
  faults_->FailAlways(StoreOp::kRead, faults_->ServerError("k"));
  EXPECT_FALSE(Read("k").ok());
  EXPECT_EQ(Sleeps(), (std::vector<Clock::duration>{milliseconds(100), milliseconds(200),
                                                    milliseconds(400), milliseconds(800),
                                                    milliseconds(1000), milliseconds(1000)}));
}

TEST_F(RetryingStoreTest, JitterStaysWithinTheBackoffAndFollowsTheSeed) {
  policy_.max_attempts = 10;
  faults_->FailAlways(StoreOp::kRead, faults_->ServerError("k"));
  EXPECT_FALSE(Read("k").ok());
  ASSERT_EQ(Sleeps().size(), 9u);
  Clock::duration cap = milliseconds(100);
  for (Clock::duration d : Sleeps()) {
    EXPECT_GE(d, Clock::duration::zero());
    EXPECT_LE(d, cap);
    cap = std::min<Clock::duration>(cap * 2, policy_.max_backoff);
  }
  std::vector<Clock::duration> first = Sleeps();
  store_.reset();  // a new store with the same seed draws the same sleeps
  EXPECT_FALSE(Read("k").ok());
  std::vector<Clock::duration> both = Sleeps();
  EXPECT_EQ(std::vector<Clock::duration>(both.begin() + first.size(), both.end()), first);
}

TEST_F(RetryingStoreTest, PutDeleteAndListAreRetried) {
  faults_->FailNext(StoreOp::kPut, faults_->ConnectionReset("new"), 2);
  ASSERT_TRUE(Store().Put("new", std::string_view("v"), {}).ok());
  EXPECT_EQ(faults_->Calls(StoreOp::kPut), 3);
  EXPECT_TRUE(local_->Head("new", {}).ok());

  faults_->FailNext(StoreOp::kDelete, faults_->ServerError("new"), 1);
  ASSERT_TRUE(Store().Delete("new", {}).ok());
  EXPECT_EQ(faults_->Calls(StoreOp::kDelete), 2);
  EXPECT_FALSE(local_->Head("new", {}).ok());

  faults_->FailNext(StoreOp::kList, faults_->ServerError(""), 1);
  Result<ListPage> page = Store().List({}, {});
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->objects.size(), 1u);
  EXPECT_EQ(faults_->Calls(StoreOp::kList), 2);
  EXPECT_EQ(faults_->Calls(StoreOp::kAny), 7);
}

TEST_F(RetryingStoreTest, CountsAndRulesHoldUnderConcurrentCalls) {
  policy_.max_attempts = 1000;
  faults_->FailNext(StoreOp::kHead, faults_->ServerError("k"), 100);
  RetryingStore& store = Store();
  std::vector<std::thread> threads;
  std::atomic<int> failed{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) failed += !store.Head("k", {}).ok();
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(faults_->Calls(StoreOp::kHead), 8 * 50 + 100);  // every injected failure used once
}

TEST(FaultInjectingStoreTest, MessagesAreShapedLikeS3) {
  FaultInjectingStore faults(std::make_shared<LocalStore>("/data"));
  EXPECT_EQ(faults.ServerError("a/b").message(),
            "file:///data/a/b: HTTP 503 SlowDown: Please reduce your request rate");
  EXPECT_TRUE(faults.ServerError("k").retryable());
  EXPECT_TRUE(faults.ConnectionReset("k").retryable());
  EXPECT_EQ(faults.AccessDenied("k").code(), StatusCode::kAccessDenied);
  EXPECT_EQ(faults.NotFound("k").code(), StatusCode::kNotFound);
}

TEST_F(RetryingStoreTest, RulesMatchOnKeySubstringAndRunOut) {
  ASSERT_TRUE(local_->Put("dir/secret.txt", std::string_view("s"), {}).ok());
  faults_->FailNext(StoreOp::kAny, faults_->NotFound("dir/secret.txt"), 2, "secret");
  EXPECT_TRUE(faults_->Head("k", {}).ok());
  EXPECT_EQ(faults_->Head("dir/secret.txt", {}).status().code(), StatusCode::kNotFound);
  std::string buf(4, '\0');
  EXPECT_EQ(faults_->Read("dir/secret.txt", 0, buf, {}).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(faults_->Head("dir/secret.txt", {}).ok());  // the rule is spent
  EXPECT_EQ(faults_->Calls(StoreOp::kHead), 3);
  EXPECT_EQ(faults_->Calls(StoreOp::kRead), 1);
  faults_->ResetCalls();
  EXPECT_EQ(faults_->Calls(StoreOp::kAny), 0);
}

TEST_F(RetryingStoreTest, DelayRuleStallsThenPassesThrough) {
  FaultRule stall;
  stall.op = StoreOp::kHead;
  stall.times = 1;
  stall.delay = milliseconds(20);
  faults_->AddRule(stall);
  Clock::time_point start = Clock::now();
  EXPECT_TRUE(faults_->Head("k", {}).ok());
  EXPECT_GE(Clock::now() - start, milliseconds(20));
  faults_->FailAlways(StoreOp::kHead, faults_->ServerError("k"));
  faults_->ClearRules();
  EXPECT_TRUE(faults_->Head("k", {}).ok());
}

// A rule for part 2 fails only that part; its repeat succeeds and the upload completes.
TEST_F(RetryingStoreTest, AFailedPartIsRetriedAlone) {
  FaultRule rule;
  rule.op = StoreOp::kUploadPart;
  rule.part_number = 2;
  rule.status = faults_->ServerError("mp");
  rule.times = 1;
  faults_->AddRule(rule);
  auto id = Store().CreateMultipartUpload("mp", {});
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  std::vector<CompletedPart> parts;
  const std::string chunks[] = {std::string(kMinPartSize, '1'), std::string(kMinPartSize, '2'),
                                "3"};
  for (int n = 1; n <= 3; ++n) {
    auto etag = Store().UploadPart("mp", *id, n, chunks[n - 1], {});
    ASSERT_TRUE(etag.ok()) << etag.status().ToString();
    parts.push_back({n, *etag, chunks[n - 1].size()});
  }
  EXPECT_EQ(faults_->Calls(StoreOp::kUploadPart), 4);
  auto done = Store().CompleteMultipartUpload("mp", *id, parts, {});
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->size, 2 * kMinPartSize + 1);
}

// The first Complete was done but its reply lost. The repeat finds the upload gone; a local
// object's ETag is its file's version, not the MD5 form the parts name, so nothing shows the
// object is this upload's: the repeat stays kNotFound rather than guess.
TEST_F(RetryingStoreTest, RepeatedCompleteAcceptsOnlyAnObjectItCanProveItsOwn) {
  auto id = Store().CreateMultipartUpload("mp", {});
  ASSERT_TRUE(id.ok());
  auto etag = Store().UploadPart("mp", *id, 1, std::string_view("only"), {});
  ASSERT_TRUE(etag.ok());
  FaultRule lost;
  lost.op = StoreOp::kCompleteUpload;
  lost.status = faults_->ServerError("mp");
  lost.times = 1;
  lost.after_call = true;
  faults_->AddRule(lost);
  auto done = Store().CompleteMultipartUpload("mp", *id, {{1, *etag, 4}}, {});
  ASSERT_FALSE(done.ok());
  EXPECT_EQ(done.status().code(), StatusCode::kNotFound) << done.status().ToString();
  EXPECT_NE(done.status().message().find("holds no object it made"), std::string::npos);
  EXPECT_EQ(faults_->Calls(StoreOp::kCompleteUpload), 2);
  EXPECT_TRUE(local_->Head("mp", {}).ok());  // the first attempt did complete it
}

TEST_F(RetryingStoreTest, CopyAbortAndListUploadsAreRetried) {
  faults_->FailNext(StoreOp::kCopy, faults_->ServerError("k2"), 1);
  ASSERT_TRUE(Store().Copy("k", "k2", {}).ok());
  EXPECT_EQ(faults_->Calls(StoreOp::kCopy), 2);
  auto id = Store().CreateMultipartUpload("mp", {});
  ASSERT_TRUE(id.ok());
  faults_->FailNext(StoreOp::kListUploads, faults_->ServerError(""), 1);
  auto uploads = Store().ListMultipartUploads("", {});
  ASSERT_TRUE(uploads.ok());
  EXPECT_EQ(uploads->size(), 1u);
  faults_->FailNext(StoreOp::kAbortUpload, faults_->ConnectionReset("mp"), 1);
  EXPECT_TRUE(Store().AbortMultipartUpload("mp", *id, {}).ok());
  EXPECT_EQ(faults_->Calls(StoreOp::kAbortUpload), 2);
  EXPECT_TRUE(local_->ListMultipartUploads("", {})->empty());
}

}  // namespace
}  // namespace lakecache
