#include "fs/order_hints.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "support/fake_clock.h"
#include "support/wait_for.h"

namespace lakecache {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kFile = 100;  // bytes of every file, one block each

// Files named "f<N>" exist (anything else does not); every fetch starts at once, unless
// `budget_blocks` runs out.
class FakeTarget : public HintTarget {
 public:
  Result<HintedFile> Resolve(const std::string& path) override {
    if (!path.starts_with("f") && !path.starts_with("big")) return Status::NotFound(path);
    HintedFile f;
    f.object_key = path;
    f.size = path.starts_with("big") ? 10 * kFile : kFile;
    f.block_size = kFile;
    return f;
  }
  uint64_t Fetch(const HintedFile& f, uint64_t, uint64_t) override {
    MutexLock lock(&mu_);
    if (budget_blocks == 0) {
      ++refused;
      return 0;
    }
    --budget_blocks;
    fetched.push_back(f.object_key);
    return 1;
  }
  void Drop(const HintedFile& f) override {
    MutexLock lock(&mu_);
    dropped.insert(f.object_key);
  }

  std::vector<std::string> Fetched() {
    MutexLock lock(&mu_);
    return fetched;
  }
  std::set<std::string> Dropped() {
    MutexLock lock(&mu_);
    return dropped;
  }
  int Refused() {
    MutexLock lock(&mu_);
    return refused;
  }
  void SetBudget(uint64_t blocks) {
    MutexLock lock(&mu_);
    budget_blocks = blocks;
  }

 private:
  Mutex mu_;
  std::vector<std::string> fetched GUARDED_BY(mu_);
  std::set<std::string> dropped GUARDED_BY(mu_);
  uint64_t budget_blocks GUARDED_BY(mu_) = UINT64_MAX;
  int refused GUARDED_BY(mu_) = 0;
};

using testing::WaitFor;

// True once the hints' fetcher waits for time to pass: it has fetched all it could.
bool Idle(const testing::FakeClock& clock) { return clock.WaitForWaiters(1); }

std::string Lines(int first, int end) {
  std::string text;
  for (int i = first; i < end; ++i) text += "f" + std::to_string(i) + "\n";
  return text;
}

void Hint(OrderHints& hints, pid_t process, const std::string& text, bool append = false) {
  uint64_t w = hints.BeginWrite(process, append);
  hints.Write(w, text);
  hints.EndWrite(w);
}

TEST(OrderHintsTest, NormalizeKeepsPathsInsideTheMount) {
  EXPECT_EQ(OrderHints::Normalize("a/./b//c"), "a/b/c");
  EXPECT_EQ(OrderHints::Normalize("/ns/x.bin"), "ns/x.bin");
  EXPECT_EQ(OrderHints::Normalize("ns/../../etc/passwd"), "");
  EXPECT_EQ(OrderHints::Normalize("./"), "");
}

TEST(OrderHintsTest, FetchesInOrderNoFurtherThanTheWindowAhead) {
  FakeTarget target;
  testing::FakeClock clock;
  OrderHints hints(&target, {.window = 5 * kFile, .clock = &clock});
  // Written in pieces that split lines, with comments, blank lines and CRLF.
  uint64_t w = hints.BeginWrite(1, false);
  hints.Write(w, "# an epoch\nf0\r\nf1\n\nf");
  hints.Write(w, "2\n" + Lines(3, 20));
  hints.EndWrite(w);
  ASSERT_TRUE(WaitFor([&] { return target.Fetched().size() == 5; }));
  ASSERT_TRUE(Idle(clock));
  EXPECT_EQ(target.Fetched(), (std::vector<std::string>{"f0", "f1", "f2", "f3", "f4"}));
  EXPECT_EQ(hints.bytes_ahead(), 5 * kFile);
  // Each file opened leaves the window: the next one is fetched.
  hints.Opened("f0");
  hints.Opened("f1");
  ASSERT_TRUE(WaitFor([&] { return target.Fetched().size() == 7; }));
  EXPECT_EQ(target.Fetched().back(), "f6");
  EXPECT_EQ(hints.counters().files_read, 2u);
  EXPECT_EQ(hints.counters().files_hinted, 20u);
}

TEST(OrderHintsTest, ReadersAheadOfTheFetchesAreNotFetchedFor) {
  FakeTarget target;
  target.SetBudget(0);  // nothing starts until the test says so
  testing::FakeClock clock;
  OrderHints hints(&target, {.window = 100 * kFile, .budget_retry = 1ms, .clock = &clock});
  Hint(hints, 1, Lines(0, 10));
  // Refused by the budget, it waits to try again. Idle alone could see the wait from before the
  // hint: the retry time would then be set after the Advance below, which it would never reach.
  ASSERT_TRUE(WaitFor([&] { return target.Refused() > 0; }));
  ASSERT_TRUE(Idle(clock));
  hints.Opened("f0");
  hints.Opened("f2");
  target.SetBudget(100);
  clock.Advance(1ms);
  ASSERT_TRUE(WaitFor([&] { return target.Fetched().size() == 8; }));
  std::vector<std::string> fetched = target.Fetched();
  EXPECT_EQ(std::count(fetched.begin(), fetched.end(), "f0"), 0);
  EXPECT_EQ(std::count(fetched.begin(), fetched.end(), "f2"), 0);
}

TEST(OrderHintsTest, AWrongHintCostsOneWindowAndFilesLeftFarBehindAreDropped) {
  FakeTarget target;
  testing::FakeClock clock;
  OrderHints hints(&target, {.window = 4 * kFile, .lag = 3, .clock = &clock});
  Hint(hints, 1, Lines(0, 50) + "missing\n");
  ASSERT_TRUE(WaitFor([&] { return target.Fetched().size() == 4; }));
  ASSERT_TRUE(Idle(clock));
  EXPECT_EQ(target.Fetched().size(), 4u);  // nobody reads: nothing more
  // A reader far ahead: what it went `lag` past is given up, and the fetches follow it.
  hints.Opened("f30");
  ASSERT_TRUE(WaitFor([&] { return target.Dropped().size() == 4; }));
  EXPECT_EQ(target.Dropped(), (std::set<std::string>{"f0", "f1", "f2", "f3"}));
  ASSERT_TRUE(WaitFor([&] { return target.Fetched().size() == 8; }));
  std::vector<std::string> fetched = target.Fetched();
  EXPECT_EQ(fetched[4], "f28");  // nothing fetched that far behind the reader
  EXPECT_EQ(hints.counters().files_dropped, 4u);
}

TEST(OrderHintsTest, OfALargeFileOnlyItsHeadIsFetched) {
  FakeTarget target;
  testing::FakeClock clock;
  // The target starts one block a call: the rest of big's head is a retry, made at once.
  OrderHints hints(
      &target, {.window = 100 * kFile, .head = 2 * kFile, .budget_retry = 0ms, .clock = &clock});
  Hint(hints, 1, "big\nf1\n");
  ASSERT_TRUE(WaitFor([&] { return target.Fetched().size() == 3; }));
  ASSERT_TRUE(Idle(clock));
  EXPECT_EQ(target.Fetched(), (std::vector<std::string>{"big", "big", "f1"}));
  EXPECT_EQ(hints.bytes_ahead(), 3 * kFile);
}

TEST(OrderHintsTest, AFileOpenedWithItsHeadHalfFetchedLeavesTheWindow) {
  FakeTarget target;
  target.SetBudget(1);  // one block of big's two-block head, then the budget is full
  testing::FakeClock clock;
  OrderHints hints(
      &target, {.window = 100 * kFile, .head = 2 * kFile, .budget_retry = 1ms, .clock = &clock});
  Hint(hints, 1, "big\n");
  ASSERT_TRUE(WaitFor([&] { return hints.bytes_ahead() == kFile; }));
  hints.Opened("big");
  EXPECT_TRUE(WaitFor([&] { return hints.bytes_ahead() == 0; }));
  target.SetBudget(100);
  clock.Advance(1ms);                      // the retry is due...
  ASSERT_TRUE(Idle(clock));                // ...and was made, or found nothing to do
  EXPECT_EQ(target.Fetched().size(), 1u);  // the reader has it: the rest is its read-ahead's
}

TEST(OrderHintsTest, ANewOrderOfTheSameProcessReplacesItsOldOneAndAppendExtendsIt) {
  FakeTarget target;
  OrderHints hints(&target, {.window = 3 * kFile});
  Hint(hints, 7, Lines(0, 10));
  ASSERT_TRUE(WaitFor([&] { return target.Fetched().size() == 3; }));
  Hint(hints, 7, Lines(100, 102));  // the next epoch
  ASSERT_TRUE(WaitFor([&] { return target.Dropped().size() == 3; }));
  ASSERT_TRUE(WaitFor([&] { return target.Fetched().size() == 5; }));
  EXPECT_EQ(target.Fetched()[3], "f100");
  // Appending goes on with the same order.
  Hint(hints, 7, Lines(200, 201), true);
  ASSERT_TRUE(WaitFor([&] { return target.Fetched().size() == 6; }));
  EXPECT_EQ(target.Fetched().back(), "f200");
  // Another process's order lives beside it (once the window has room).
  Hint(hints, 8, Lines(300, 301));
  hints.Opened("f100");
  ASSERT_TRUE(WaitFor([&] { return target.Fetched().size() == 7; }));
  EXPECT_NE(hints.Describe().find("process 8"), std::string::npos);
}

TEST(OrderHintsTest, AnOrderNobodyReadsIsDroppedAfterItsIdleTime) {
  FakeTarget target;
  testing::FakeClock clock;
  OrderHints hints(&target, {.window = 10 * kFile, .idle = 100ms, .clock = &clock});
  Hint(hints, 1, Lines(0, 5));
  ASSERT_TRUE(WaitFor([&] { return target.Fetched().size() == 5; }));
  EXPECT_TRUE(target.Dropped().empty());
  clock.Advance(2s);  // past the idle time, and the fetcher's next look at it
  ASSERT_TRUE(WaitFor([&] { return target.Dropped().size() == 5; }));
  EXPECT_EQ(hints.bytes_ahead(), 0u);
  EXPECT_EQ(hints.Describe().find("order "), std::string::npos);
}

}  // namespace
}  // namespace lakecache
