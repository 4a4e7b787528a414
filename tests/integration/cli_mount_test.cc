// `lakecache mount`, `umount` and the admin commands as a new user meets them: what they say
// (on stderr, in the mount's log at the default level) and the exit codes, for an empty prefix, a
// missing bucket, a stale mount after a kill, control sockets, `report` and `load` output, and the
// log lines of fetches, evictions and a full cache disk.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "integration/cli_fixture.h"
#include "support/test_data.h"

namespace lakecache {
namespace {

namespace fs = std::filesystem;
using testing::ChildProcess;
using testing::RunResult;

class CliMountTest : public testing::CliFixture {
 protected:
  void SetUp() override {
    CliFixture::SetUp();
    ASSERT_TRUE(CanMount()) << "mount tests need root and /dev/fuse";
  }

  // The control sockets in run_dir_.
  std::vector<std::string> Sockets() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(run_dir_, ec)) {
      if (e.path().extension() == ".sock") out.push_back(e.path().string());
    }
    return out;
  }
};

TEST_F(CliMountTest, EmptyPrefixMountsWithAWarningAndMissingBucketExitsTwo) {
  std::string mnt = Mountpoint();
  std::string log = scratch_->path() + "/empty.log";
  RunResult r = Lc({"--log-file", log, "mount", "s3://cli/nothere", mnt, "--background"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(testing::IsMounted(mnt));
  EXPECT_EQ(Count(r.err, "lakecache: warning: s3://cli/nothere holds no objects"), 1u) << r.err;
  EXPECT_TRUE(fs::is_empty(mnt));
  ASSERT_EQ(Lc({"umount", mnt}).exit_code, 0);

  // A prefix that holds objects: no warning.
  std::string data = Mountpoint();
  RunResult full = Lc({"--log-file", log, "mount", "s3://cli/data", data, "--background"});
  ASSERT_EQ(full.exit_code, 0) << full.err;
  EXPECT_EQ(full.err.find("warning"), std::string::npos) << full.err;
  ASSERT_EQ(Lc({"umount", data}).exit_code, 0);

  std::string other = Mountpoint();
  RunResult missing = Lc({"mount", "s3://no-such-bucket/x", other});
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
  EXPECT_NE(missing.err.find("s3://no-such-bucket/x/: bucket does not exist"), std::string::npos)
      << missing.err;
  EXPECT_FALSE(testing::IsMounted(other));
}

// A SIGKILLed mount leaves a dead FUSE mount and its control socket: mounting again names the
// fix, `umount` clears it, and the next mount replaces the socket. A clean unmount removes it.
TEST_F(CliMountTest, StaleMountAfterAKillIsNamedAndItsSocketReplaced) {
  std::string mnt = Mountpoint();
  ChildProcess* mount = StartMount({"mount", "s3://cli/data", mnt}, mnt, "killed.log");
  ASSERT_NE(mount, nullptr);
  ASSERT_EQ(Sockets().size(), 1u);
  ::kill(mount->pid(), SIGKILL);
  ASSERT_TRUE(WaitFor([&] { return !mount->Running(); }, std::chrono::seconds(10)));
  ASSERT_EQ(Sockets().size(), 1u) << "a killed mount cannot remove its socket";

  RunResult again = Lc({"mount", "s3://cli/data", mnt});
  EXPECT_EQ(again.exit_code, 2) << again.err;
  EXPECT_NE(again.err.find(mnt + " is a stale lakecache mount"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("`lakecache umount " + mnt + "`"), std::string::npos) << again.err;

  RunResult umount = Lc({"umount", mnt});
  ASSERT_EQ(umount.exit_code, 0) << umount.err;
  EXPECT_FALSE(testing::IsMounted(mnt));
  std::string log = scratch_->path() + "/daemon.log";
  RunResult remount = Lc({"--log-file", log, "mount", "s3://cli/data", mnt, "--background"});
  ASSERT_EQ(remount.exit_code, 0) << remount.err;
  RunResult report = Lc({"report", mnt});
  EXPECT_EQ(report.exit_code, 0) << report.err;
  EXPECT_EQ(Sockets().size(), 1u);

  ASSERT_EQ(Lc({"umount", mnt}).exit_code, 0);
  EXPECT_TRUE(WaitFor([&] { return Sockets().empty(); }, std::chrono::seconds(10)))
      << "the socket outlived a clean unmount";
}

}  // namespace
}  // namespace lakecache
