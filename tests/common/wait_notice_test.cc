#include "common/wait_notice.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace lakecache {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Collects the lines a notice prints; a test waits for the count it needs.
struct Printed {
  Mutex mu;
  CondVar cv;
  std::vector<std::string> lines GUARDED_BY(mu);

  void Add(const std::string& line) {
    MutexLock lock(&mu);
    lines.push_back(line);
    cv.SignalAll();
  }
  // False when `n` lines did not come within a generous bound.
  bool WaitFor(size_t n) {
    auto give_up = std::chrono::steady_clock::now() + seconds(30);
    MutexLock lock(&mu);
    while (lines.size() < n) {
      if (!cv.WaitUntil(&mu, give_up) && lines.size() < n) return false;
    }
    return true;
  }
  std::vector<std::string> Lines() {
    MutexLock lock(&mu);
    return lines;
  }
};

WaitNoticeOptions Options(Printed* printed, bool terminal, Duration first, Duration every) {
  WaitNoticeOptions options;
  options.first = first;
  options.every = every;
  options.limit = seconds(30);
  options.terminal = [terminal] { return terminal; };
  options.print = [printed](const std::string& line) { printed->Add(line); };
  return options;
}

TEST(WaitNoticeTest, LineNamesThePeerTheTimeWaitedAndTheBound) {
  EXPECT_EQ(WaitNotice::Line("http://10.0.0.5:9000", milliseconds(8400), seconds(30)),
            "lakecache: still waiting for http://10.0.0.5:9000 (8 s of 30 s)");
  EXPECT_EQ(WaitNotice::Line("master 10.0.0.5:7400", seconds(3), Duration(0)),
            "lakecache: still waiting for master 10.0.0.5:7400 (3 s)");
}

TEST(WaitNoticeTest, OnATerminalPrintsRepeatedlyUntilStopped) {
  Printed printed;
  WaitNotice notice("http://127.0.0.1:9",
                    Options(&printed, true, milliseconds(1), milliseconds(1)));
  ASSERT_TRUE(printed.WaitFor(3));
  notice.Stop();
  size_t after_stop = printed.Lines().size();
  for (const std::string& line : printed.Lines()) {
    EXPECT_TRUE(line.starts_with("lakecache: still waiting for http://127.0.0.1:9 (")) << line;
    EXPECT_TRUE(line.ends_with(" of 30 s)")) << line;
  }
  notice.Stop();  // twice is fine
  EXPECT_EQ(printed.Lines().size(), after_stop);
}

TEST(WaitNoticeTest, PrintsNothingWhenTheOutputIsNoTerminal) {
  Printed printed;
  {
    WaitNotice notice("http://127.0.0.1:9", Options(&printed, false, Duration(0), milliseconds(1)));
  }
  EXPECT_TRUE(printed.Lines().empty());
}

TEST(WaitNoticeTest, AWaitThatEndsBeforeTheFirstLinePrintsNothing) {
  Printed printed;
  {
    WaitNotice notice("http://127.0.0.1:9", Options(&printed, true, seconds(3600), seconds(1)));
  }  // the destructor returns at once: it does not wait out `first`
  EXPECT_TRUE(printed.Lines().empty());
}

}  // namespace
}  // namespace lakecache
