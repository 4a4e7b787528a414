// Listings through real mounts of synthetic:// trees: a folder of many pages is listed whole and
// each entry once (it is read as its pages come). Which listed entries come with their
// attributes (-o readdirplus=, src/fuse/readdirplus_policy.h), on a tree of 20 folders of 1,000
// files: a find makes the kernel hold
// no more than each folder's first entries, a stat of every file then turns the mount to whole
// folders after the first ones (its lookups tell it), "always" gives every entry and "never" none.
// What holds is read from the mount's /metrics: its held inodes and its lookups.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/fuse_mounts.h"
#include "support/process.h"
#include "support/test_servers.h"
#include "support/wait_for.h"

namespace lakecache::readdirplus_test {
namespace {

using testing::RunCommand;
using testing::RunResult;

constexpr int kFolders = 20;
constexpr int kFiles = 1000;  // per folder
constexpr int kFirstEntries = 128;

class ReaddirplusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<testing::TempDir>("readdirplus");
    mountpoint_ = dir_->path() + "/mnt";
    RunCommand({"mkdir", "-p", mountpoint_});
  }
  void TearDown() override {
    if (mount_) {
      EXPECT_TRUE(testing::UnmountForTest(mountpoint_).ok());
      mount_->Stop();
    }
  }

  // Mounts synthetic://`spec` (20k: 20 folders of 1,000 files) with -o readdirplus=`mode`
  // (nothing held in the kernel yet).
  void Mount(const std::string& mode, const std::string& spec = std::to_string(kFolders * kFiles),
             const std::vector<std::string>& options = {}) {
    port_ = testing::FreeLoopbackPort();
    std::vector<std::string> argv = {LAKECACHE_BINARY,
                                     "mount",
                                     "synthetic://" + spec,
                                     mountpoint_,
                                     "-o",
                                     "namespaces.synthetic.immutable=yes",
                                     "-o",
                                     "readdirplus=" + mode,
                                     "--metrics-listen",
                                     "127.0.0.1:" + std::to_string(port_)};
    argv.insert(argv.end(), options.begin(), options.end());
    auto started = testing::ChildProcess::Start(argv, dir_->path() + "/mount.log");
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    mount_ = std::move(started).value();
    ASSERT_TRUE(testing::WaitFor([&] { return testing::IsMounted(mountpoint_); }))
        << mount_->LogTail();
    ASSERT_TRUE(testing::WaitFor([&] { return Metric("lakecache_mount_held_inodes") >= 0; }));
  }

  // A sample of the mount's /metrics; -1 when there is none.
  double Metric(const std::string& sample) {
    RunResult r =
        RunCommand({"curl", "-sf", "http://127.0.0.1:" + std::to_string(port_) + "/metrics"}, {},
                   std::chrono::seconds(20));
    if (r.exit_code != 0) return -1;
    for (size_t at = 0; at < r.out.size();) {
      size_t end = r.out.find('\n', at);
      std::string line = r.out.substr(at, end - at);
      if (line.starts_with(sample + " ")) return std::stod(line.substr(sample.size() + 1));
      at = end == std::string::npos ? end : end + 1;
    }
    return -1;
  }
  double Held() { return Metric("lakecache_mount_held_inodes"); }
  double Lookups() {
    return Metric("lakecache_fuse_operation_duration_seconds_count{op=\"lookup\"}");
  }

  // find over the mount (with -printf '%s', a stat of every file); the files it printed.
  int Find(bool stat) {
    std::vector<std::string> argv = {"find", mountpoint_, "-type", "f"};
    if (stat) argv.insert(argv.end(), {"-printf", "%s\n"});
    RunResult r = RunCommand(argv, {}, std::chrono::seconds(120));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    int lines = 0;
    for (char c : r.out) lines += c == '\n' ? 1 : 0;
    return lines;
  }

  std::unique_ptr<testing::TempDir> dir_;
  std::string mountpoint_;
  std::unique_ptr<testing::ChildProcess> mount_;
  int port_ = 0;
};

TEST_F(ReaddirplusTest, AFindHoldsFolderHeadsAndStatsTurnTheMountToWholeFolders) {
  Mount("adaptive");
  ASSERT_EQ(Find(false), kFolders * kFiles);
  // The kernel holds each folder, and each folder's first entries: the rest came bare.
  const double folders_and_heads = kFolders * (kFirstEntries + 1);
  EXPECT_LE(Held(), folders_and_heads + 10);
  EXPECT_GE(Held(), folders_and_heads);
  const double lookups_of_find = Lookups();

  // A stat of every file: the first folder's bare entries are looked up, and from then on
  // folders come whole but for one entry in 32 (the probes); all of it still a stat of each file.
  ASSERT_EQ(Find(true), kFolders * kFiles);
  const double lookups = Lookups() - lookups_of_find;
  const double bare_per_folder = kFiles - kFirstEntries;
  EXPECT_GE(lookups, bare_per_folder) << "the first folder's bare entries were looked up";
  EXPECT_LE(lookups, 3 * bare_per_folder + kFolders * (bare_per_folder / 32 + 1))
      << "the folders after the first ones should have come with their attributes";
  EXPECT_GE(Held(), kFolders * kFiles);
}

TEST_F(ReaddirplusTest, AlwaysGivesEveryEntryAndNeverNone) {
  Mount("always");
  ASSERT_EQ(Find(false), kFolders * kFiles);
  EXPECT_GE(Held(), kFolders * kFiles);
  ASSERT_TRUE(testing::UnmountForTest(mountpoint_).ok());
  mount_->Stop();

  Mount("never");
  ASSERT_EQ(Find(false), kFolders * kFiles);
  EXPECT_LE(Held(), kFolders + 10);
  const double lookups_of_find = Lookups();
  ASSERT_EQ(Find(true), kFolders * kFiles);
  EXPECT_GE(Lookups() - lookups_of_find, kFolders * kFiles);
}

TEST_F(ReaddirplusTest, BeyondItsInodeBudgetTheMountHasTheKernelForgetFiles) {
  constexpr double kBudget = 2000;
  Mount("always", std::to_string(kFolders * kFiles), {"-o", "client.kernel_inodes=2000"});
  // A stat of every file gives the kernel 20,000 files; the mount has it forget all but about
  // the budget (down to 15/16 of it), and they stat again as before.
  ASSERT_EQ(Find(true), kFolders * kFiles);
  EXPECT_TRUE(testing::WaitFor([&] { return Held() <= kBudget; })) << Held() << " held";
  EXPECT_GE(Metric("lakecache_mount_inodes_released_total"), kFolders * kFiles - kBudget);
  ASSERT_EQ(Find(true), kFolders * kFiles);
  RunResult cat = RunCommand({"cat", mountpoint_ + "/d000/f000.bin"});
  EXPECT_EQ(cat.exit_code, 0) << cat.err;
}

TEST_F(ReaddirplusTest, AFolderOfManyPagesListsEveryEntryOnce) {
  constexpr int kEntries = 4500;  // five pages of the store's listing
  Mount("adaptive", std::to_string(kEntries) + ",fanout=" + std::to_string(kEntries));
  RunResult ls = RunCommand({"ls", "-f", mountpoint_}, {}, std::chrono::seconds(60));
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  std::set<std::string> names;
  int lines = 0;
  for (size_t at = 0, end; (end = ls.out.find('\n', at)) != std::string::npos; at = end + 1) {
    std::string name = ls.out.substr(at, end - at);
    if (name == "." || name == "..") continue;
    names.insert(name);
    ++lines;
  }
  EXPECT_EQ(lines, kEntries);
  EXPECT_EQ(names.size(), static_cast<size_t>(kEntries));
  // Each is there to stat, in a fresh walk as in the one that listed it.
  EXPECT_EQ(Find(true), kEntries);
  EXPECT_EQ(Find(false), kEntries);
}

TEST_F(ReaddirplusTest, AnUnknownModeIsRefusedWithTheModesNamed) {
  RunResult r = RunCommand(
      {LAKECACHE_BINARY, "mount", "synthetic://1k", mountpoint_, "-o", "readdirplus=sometimes"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("readdirplus is adaptive, always or never, not 'sometimes'"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(testing::IsMounted(mountpoint_));
}

}  // namespace
}  // namespace lakecache::readdirplus_test
