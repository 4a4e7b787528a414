// `lakecache mount`, `umount` and the admin commands as a new user meets them: what they say
// (on stderr, in the mount's log at the default level) and the exit codes, for an empty prefix, a
// missing bucket, a stale mount after a kill, control sockets, `report` and `load` output, and the
// log lines of fetches, evictions and a full cache disk.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "integration/cli_fixture.h"
#include "support/test_data.h"
#include "support/wait_for.h"

// Its own namespace: the files of integration_tests are compiled in unity batches.
namespace lakecache::cli_mount_test {
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

  void TearDown() override {
    StopAll();
    for (const std::string& tmpfs : tmpfs_) ::umount2(tmpfs.c_str(), MNT_DETACH);
    CliFixture::TearDown();
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

  // A tmpfs of `size` at a fresh folder, unmounted by TearDown.
  std::string Tmpfs(const std::string& size) {
    std::string path = Folder("tmpfs-" + std::to_string(tmpfs_.size()));
    std::string options = "size=" + size;
    if (::mount("tmpfs", path.c_str(), "tmpfs", 0, options.c_str()) != 0) {
      ADD_FAILURE() << "mount -t tmpfs " << path << ": " << std::strerror(errno);
      return "";
    }
    tmpfs_.push_back(path);
    return path;
  }

  // Writes zeros to `path` until the file system is full.
  static void Fill(const std::string& path) {
    std::ofstream out(path, std::ios::binary);
    std::string chunk(64 << 10, '\0');
    while (out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()))) {
    }
  }

  std::vector<std::string> tmpfs_;
};

TEST_F(CliMountTest, EmptyPrefixMountsWithAWarningAndMissingBucketExitsTwo) {
  std::string mnt = Mountpoint();
  std::string log = scratch_->path() + "/empty.log";
  RunResult r = Lc({"--log-file", log, "mount", "s3://cli/nothere", mnt, "--background"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(testing::IsMounted(mnt));
  EXPECT_EQ(Count(r.err, "lakecache: warning: s3://cli/nothere holds no objects"), 1u) << r.err;
  EXPECT_TRUE(fs::is_empty(mnt));
  Umount(mnt, log);

  // A prefix that holds objects: no warning.
  std::string data = Mountpoint();
  RunResult full = Lc({"--log-file", log, "mount", "s3://cli/data", data, "--background"});
  ASSERT_EQ(full.exit_code, 0) << full.err;
  EXPECT_EQ(full.err.find("warning"), std::string::npos) << full.err;
  Umount(data, log);

  std::string other = Mountpoint();
  RunResult missing = Lc({"mount", "s3://no-such-bucket/x", other});
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
  EXPECT_NE(missing.err.find("s3://no-such-bucket/x/: bucket does not exist"), std::string::npos)
      << missing.err;
  EXPECT_FALSE(testing::IsMounted(other));
}

// A mount's start-up is bounded by --timeout: a store that accepts connections and never answers
// fails the mount, naming its endpoint, before anything is mounted (it waited 60 s).
TEST_F(CliMountTest, MountAtAStoreThatNeverAnswersFailsWithinTheTimeoutUnmounted) {
  auto silent = testing::SilentListener::Start();
  ASSERT_TRUE(silent.ok()) << silent.status().ToString();
  std::string endpoint = "http://" + (*silent)->address();
  std::string mnt = Mountpoint();
  RunResult r = Lc(
      {"--timeout", "2s", "--endpoint", endpoint, "mount", "s3://cli/data", mnt, "--background"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("no answer from " + endpoint + " within 2s while listing the namespaces"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(testing::IsMounted(mnt));
}

// A --metrics-listen port in use fails the mount at once, before it mounts (it used to mount, and
// fail 10 s later).
TEST_F(CliMountTest, MetricsListenOnAPortInUseFailsBeforeMounting) {
  auto busy = testing::SilentListener::Start();
  ASSERT_TRUE(busy.ok()) << busy.status().ToString();
  std::string mnt = Mountpoint();
  std::string log = scratch_->path() + "/busy.log";
  RunResult r = Lc({"--log-file", log, "mount", "s3://cli/data", mnt, "--background",
                    "--metrics-listen", (*busy)->address()});
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("--metrics-listen " + (*busy)->address() + ": cannot listen there"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(testing::IsMounted(mnt));
  // No holder was started, so nothing was ever mounted.
  EXPECT_EQ(ReadAll(log).find("holder: started server"), std::string::npos) << ReadAll(log);
}

// A SIGKILLed mount (its holder and its server) leaves a dead FUSE mount and its control socket:
// the next mount clears the dead one itself and replaces the socket. A clean unmount removes it.
TEST_F(CliMountTest, ADeadMountIsClearedByTheNextMountAndItsSocketReplaced) {
  std::string mnt = Mountpoint();
  ChildProcess* mount = StartMount({"mount", "s3://cli/data", mnt}, mnt, "killed.log");
  ASSERT_NE(mount, nullptr);
  // The control socket is bound just after the kernel lists the mount.
  ASSERT_TRUE(WaitFor([&] { return Sockets().size() == 1; }, std::chrono::seconds(10)));
  ::kill(-mount->pid(), SIGKILL);
  ASSERT_TRUE(WaitFor([&] { return !mount->Running(); }, std::chrono::seconds(10)));
  ASSERT_EQ(Sockets().size(), 1u) << "a killed mount cannot remove its socket";
  EXPECT_TRUE(testing::IsMounted(mnt)) << "dead, but still in the mount table";

  std::string log = scratch_->path() + "/daemon.log";
  RunResult remount = Lc({"--log-file", log, "mount", "s3://cli/data", mnt, "--background"});
  ASSERT_EQ(remount.exit_code, 0) << remount.err;
  EXPECT_NE(remount.err.find("cleared the dead lakecache mount at " + mnt), std::string::npos)
      << remount.err;
  RunResult report = Lc({"report", mnt});
  EXPECT_EQ(report.exit_code, 0) << report.err;
  EXPECT_EQ(Sockets().size(), 1u);

  Umount(mnt, log);
  EXPECT_TRUE(WaitFor([&] { return Sockets().empty(); }, std::chrono::seconds(10)))
      << "the socket outlived a clean unmount";
}

// `umount` returns once the mount's holder and server have exited: none is left with the
// mountpoint in its command line, and a `mount` of the folder right after finds no holder still
// listening there.
TEST_F(CliMountTest, UmountReturnsOnceTheMountsProcessesAreGone) {
  std::string mnt = Mountpoint();
  std::string log = scratch_->path() + "/again.log";
  for (int round = 0; round < 5; ++round) {
    RunResult up = Lc({"--log-file", log, "mount", "s3://cli/data", mnt, "--background"});
    ASSERT_EQ(up.exit_code, 0) << "round " << round << ": " << up.err;
    ASSERT_FALSE(testing::ProcessesMentioning(mnt).empty()) << "round " << round;
    RunResult down = Lc({"umount", mnt});
    ASSERT_EQ(down.exit_code, 0) << "round " << round << ": " << down.err;
    EXPECT_EQ(down.err, "");
    EXPECT_EQ(testing::ProcessesMentioning(mnt), std::vector<pid_t>()) << "round " << round;
    EXPECT_FALSE(testing::IsMounted(mnt));
  }
}

// A busy mount stays mounted, and `umount` says who keeps it busy.
TEST_F(CliMountTest, UmountOfABusyMountSaysWhoUsesIt) {
  std::string mnt = Mountpoint();
  RunResult up = Lc({"--log-file", scratch_->path() + "/busy.log", "mount", "s3://cli/data", mnt,
                     "--background"});
  ASSERT_EQ(up.exit_code, 0) << up.err;
  int fd = ::open((mnt + "/a.txt").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  RunResult busy = Lc({"umount", mnt});
  EXPECT_EQ(busy.exit_code, 1) << busy.err;
  EXPECT_NE(busy.err.find(mnt + " is busy: pid " + std::to_string(::getpid()) + " ("),
            std::string::npos)
      << busy.err;
  EXPECT_NE(busy.err.find(") has a file open there"), std::string::npos) << busy.err;
  EXPECT_TRUE(testing::IsMounted(mnt));
  ::close(fd);
  RunResult down = Lc({"umount", mnt});
  EXPECT_EQ(down.exit_code, 0) << down.err;
  EXPECT_EQ(testing::ProcessesMentioning(mnt), std::vector<pid_t>());
}

// `mount --background` says what it mounted where, and where it logs: without --log-file, a file
// of its own per mountpoint.
TEST_F(CliMountTest, BackgroundMountSaysWhereItLogsInAFileOfItsOwn) {
  std::string first = Mountpoint();
  std::string second = Mountpoint();
  std::vector<std::string> logs;
  for (const auto& [uri, mnt] : {std::pair{std::string("s3://cli/data"), first},
                                 std::pair{std::string("s3://cli"), second}}) {
    RunResult up = Lc({"mount", uri, mnt, "--background"});
    ASSERT_EQ(up.exit_code, 0) << up.err;
    std::string said = "mounted " + uri + " at " + mnt + " (log: ";
    ASSERT_TRUE(up.out.starts_with(said) && up.out.ends_with(".log)\n")) << up.out;
    logs.push_back(up.out.substr(said.size(), up.out.size() - said.size() - 2));
  }
  for (const std::string& log : logs) {
    EXPECT_TRUE(log.starts_with("/tmp/lakecache-mount-" + std::to_string(::getuid()) + "-")) << log;
    EXPECT_NE(log.find(fs::path(first).parent_path().filename().string()), std::string::npos)
        << "named after the mountpoint: " << log;
    EXPECT_TRUE(WaitFor([&] { return fs::exists(log) && fs::file_size(log) > 0; },
                        std::chrono::seconds(10)))
        << log;
  }
  EXPECT_NE(logs[0], logs[1]);
  EXPECT_NE(logs[0].find("mnt-0"), std::string::npos) << logs[0];
  EXPECT_NE(logs[1].find("mnt-1"), std::string::npos) << logs[1];
  // Logged at start by the server of each, in its own file.
  EXPECT_NE(ReadAll(logs[0]).find(first), std::string::npos) << ReadAll(logs[0]);
  EXPECT_EQ(ReadAll(logs[0]).find(second), std::string::npos) << ReadAll(logs[0]);
  for (const std::string& mnt : {first, second}) EXPECT_EQ(Lc({"umount", mnt}).exit_code, 0);
  for (const std::string& log : logs) fs::remove(log);
}

// One unit formatter (binary units) and nouns that agree with their numbers; `report` shows each
// tier once and the hit ratio once.
TEST_F(CliMountTest, ReportShowsEachTierAndTheHitRatioOnceAndLoadSpeaksMiB) {
  std::string mnt = Mountpoint();
  std::string log = scratch_->path() + "/mount.log";
  RunResult up = Lc({"--log-file", log, "mount", "s3://cli", mnt, "--cache-dir", Folder("cache"),
                     "--cache-size", "1GiB", "--background"});
  ASSERT_EQ(up.exit_code, 0) << up.err;

  RunResult one = Lc({"load", mnt + "/data/a.txt"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.out.find(", 1 file, 12 B\n"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find(" loaded                    1 file          12 B\n"), std::string::npos)
      << one.out;
  RunResult tree = Lc({"load", mnt + "/data", "-R"});
  ASSERT_EQ(tree.exit_code, 0) << tree.err;
  EXPECT_NE(tree.out.find(" folders, 4 files, 5.0 MiB\n"), std::string::npos) << tree.out;
  EXPECT_NE(tree.out.find(" already cached            1 file          12 B\n"), std::string::npos)
      << tree.out;
  std::regex plural_mismatch(
      R"(\b1 (files|folders|blocks)\b|\b([02-9]|\d\d+) (file|folder|block)\b)");
  for (const RunResult* r : {&one, &tree}) {
    EXPECT_FALSE(std::regex_search(r->out, plural_mismatch)) << r->out;
    EXPECT_EQ(r->out.find(" MB"), std::string::npos) << r->out;
    EXPECT_EQ(r->out.find(" kB"), std::string::npos) << r->out;
  }

  RunResult report = Lc({"report", mnt});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_EQ(Count(report.out, "hit ratio"), 1u) << report.out;
  EXPECT_TRUE(report.out.starts_with("mount " + mnt + ": hit ratio ")) << report.out;
  EXPECT_EQ(Count(report.out, " used, "), 2u) << report.out;
  EXPECT_EQ(Count(report.out, "  memory\n"), 1u) << report.out;
  EXPECT_EQ(Count(report.out, "  disk:" + scratch_->path() + "/cache\n"), 1u) << report.out;
  EXPECT_EQ(report.out.find("capacity"), std::string::npos) << report.out;
  EXPECT_FALSE(std::regex_search(report.out, plural_mismatch)) << report.out;

  RunResult json_report = Lc({"report", mnt, "--json"});
  ASSERT_EQ(json_report.exit_code, 0) << json_report.err;
  nlohmann::json j = nlohmann::json::parse(json_report.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << json_report.out;
  const nlohmann::json& totals = j["totals"];
  EXPECT_FALSE(totals.contains("used_bytes")) << totals.dump();
  ASSERT_EQ(totals["tiers"].size(), 2u) << totals.dump();
  // One cache: each tier's total is that tier's own, not the sum of both.
  std::map<std::string, uint64_t> used;
  for (const nlohmann::json& t : j["workers"][0]["tiers"]) {
    std::string tier = t.value("tier", "");
    used[tier.substr(0, tier.find(':'))] = t.value("used_bytes", uint64_t{0});
  }
  ASSERT_EQ(used.size(), 2u) << j.dump();
  EXPECT_GT(used["memory"], 0u) << j.dump();
  for (const nlohmann::json& t : totals["tiers"]) {
    EXPECT_EQ(t.value("used_bytes", uint64_t{1}), used[t.value("tier", "")]) << j.dump();
  }

  RunResult stat = Lc({"stat", mnt + "/data/big.bin"});
  ASSERT_EQ(stat.exit_code, 0) << stat.err;
  EXPECT_NE(stat.out.find("5.0 MiB"), std::string::npos) << stat.out;
  Umount(mnt, log);
}

// At the default level the log holds events, never a line per read; `cache stats:` once at the
// end.
TEST_F(CliMountTest, DefaultLevelLogsCacheStatsOnceAndNothingPerRead) {
  std::string mnt = Mountpoint();
  ChildProcess* mount = StartMount({"mount", "s3://cli/data", mnt}, mnt, "default.log");
  ASSERT_NE(mount, nullptr);
  // The mount shows before its server has logged its start: count once it has.
  ASSERT_TRUE(
      WaitFor([&] { return ReadAll(mount->log_path()).find("mounted at") != std::string::npos; },
              std::chrono::seconds(20)))
      << ReadAll(mount->log_path());
  size_t lines_before = Count(ReadAll(mount->log_path()), "\n");
  for (int round = 0; round < 3; ++round) {
    for (const char* file : {"a.txt", "sub/b.txt", "big.bin", "with space.txt"}) {
      EXPECT_EQ(testing::ReadWholeFile(mnt + "/" + file).error, 0) << file;
    }
  }
  EXPECT_EQ(Count(ReadAll(mount->log_path()), "\n"), lines_before) << ReadAll(mount->log_path());
  UnmountAndWait(mnt, mount);
  std::string log = ReadAll(mount->log_path());
  EXPECT_EQ(Count(log, "cache stats: fetches="), 1u) << log;
  EXPECT_EQ(Count(log, " debug "), 0u) << log;
}

// --log-level debug shows each block fetched (why and how long) and each block evicted.
TEST_F(CliMountTest, DebugLevelLogsFetchesAndEvictions) {
  std::string mnt = Mountpoint();
  ChildProcess* mount =
      StartMount({"--log-level", "debug", "mount", "s3://cli/data", mnt, "--mem-cache", "4MiB",
                  "-o", "cache.policy=lru", "--read-ahead", "0"},
                 mnt, "debug.log");
  ASSERT_NE(mount, nullptr);
  testing::FileBytes big = testing::ReadWholeFile(mnt + "/big.bin");
  EXPECT_EQ(big.bytes.size(), kBigSize);
  UnmountAndWait(mnt, mount);
  std::string log = ReadAll(mount->log_path());
  EXPECT_NE(log.find("miss: fetch of block 0 (bytes 0+4194304) of data/big.bin: "),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("miss: fetch of block 1 (bytes 4194304+1048579) of data/big.bin: "),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("memory cache: evicted "), std::string::npos) << log;
}

// A disk that cannot hold the configured capacity says so at start-up, with the tier's size; one
// that fills while mounted says so once.
TEST_F(CliMountTest, FullCacheDiskWarnsOnceWithTheTierSize) {
  std::string disk = Tmpfs("16m");
  ASSERT_FALSE(disk.empty());
  std::string mnt = Mountpoint();
  std::vector<std::string> args = {"mount", "s3://cli/data", mnt, "--cache-dir", disk + "/cache"};
  ChildProcess* mount = StartMount(args, mnt, "short.log");
  ASSERT_NE(mount, nullptr);
  // The holder mounts and its server then opens the disk tier: the server's warning may come
  // after "mounted", which is when StartMount returns.
  EXPECT_TRUE(testing::WaitFor([&] {
    return ReadAll(mount->log_path()).find("the disk is short of room") != std::string::npos;
  })) << ReadAll(mount->log_path());
  std::string log = ReadAll(mount->log_path());
  EXPECT_EQ(Count(log, "the disk is short of room"), 1u) << log;
  EXPECT_NE(log.find("not the 10.0 GiB configured"), std::string::npos) << log;

  Fill(disk + "/filler");
  EXPECT_EQ(testing::ReadWholeFile(mnt + "/big.bin").bytes.size(), kBigSize);
  EXPECT_EQ(testing::ReadWholeFile(mnt + "/a.txt").error, 0);
  EXPECT_TRUE(WaitFor(
      [&] { return ReadAll(mount->log_path()).find("the disk is full") != std::string::npos; },
      std::chrono::seconds(10)))
      << ReadAll(mount->log_path());
  UnmountAndWait(mnt, mount);
  log = ReadAll(mount->log_path());
  EXPECT_EQ(Count(log, "the disk is full"), 1u) << log;
  EXPECT_NE(log.find("no more blocks are cached there until space frees up; the tier holds 0 B"),
            std::string::npos)
      << log;

  // Mounted again on the full disk: the tier is 0 B from the start. The server opens its disk
  // tier after the holder mounts: its warning is waited for.
  ChildProcess* again = StartMount(args, mnt, "full.log");
  ASSERT_NE(again, nullptr);
  EXPECT_TRUE(testing::WaitFor([&] {
    return ReadAll(again->log_path()).find("the disk is full") != std::string::npos;
  })) << ReadAll(again->log_path());
  std::string full = ReadAll(again->log_path());
  EXPECT_EQ(Count(full, "the disk is full"), 1u) << full;
  EXPECT_NE(full.find("the disk tier there holds at most 0 B, not the 10.0 GiB configured"),
            std::string::npos)
      << full;
  UnmountAndWait(mnt, again);
}

// The control socket serves the mount's own uid and root, and another uid only when allowed
// (--allow-uid, client.allow_uids): a uid not allowed is refused by the uid check even when the
// socket is open to all, and the mount logs the refusal once, saying how to allow it.
TEST_F(CliMountTest, ControlSocketServesAnotherUidOnlyWhenAllowed) {
  constexpr char kNobody[] = "65534";
  // nobody must reach the socket's folder, so that only the mount can turn it away.
  fs::permissions(scratch_->path(), fs::perms(0755));
  fs::permissions(run_dir_, fs::perms(0755));
  auto as_nobody = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                     LAKECACHE_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::RunCommand(argv, Env(), std::chrono::seconds(60));
  };

  std::string mnt = Mountpoint();
  ChildProcess* mount = StartMount(
      {"mount", "s3://cli/data", mnt, "-o", "allow_other", "-o", "client.allow_uids.0=65533"}, mnt,
      "others.log");
  ASSERT_NE(mount, nullptr);
  ASSERT_TRUE(WaitFor([&] { return Sockets().size() == 1; }, std::chrono::seconds(10)));
  EXPECT_EQ(fs::status(Sockets()[0]).permissions() & fs::perms::all, fs::perms(0666));
  for (int i = 0; i < 2; ++i) {
    RunResult refused = as_nobody({"report", mnt});
    EXPECT_EQ(refused.exit_code, 1) << refused.out << refused.err;
    EXPECT_NE(refused.err.find("cannot reach the control socket of the mount at " + mnt),
              std::string::npos)
        << refused.err;
  }
  RunResult own = Lc({"report", mnt});
  EXPECT_EQ(own.exit_code, 0) << own.err;
  std::string told =
      "refused a connection: uid 65534 may not use the control socket of the "
      "mount at " +
      mnt + " (allow it with lakecache mount --allow-uid 65534)";
  EXPECT_EQ(Count(ReadAll(mount->log_path()), told), 1u) << mount->LogTail();
  UnmountAndWait(mnt, mount);

  std::string allowed_mnt = Mountpoint();
  ChildProcess* allowed = StartMount(
      {"mount", "s3://cli/data", allowed_mnt, "-o", "allow_other", "--allow-uid", kNobody},
      allowed_mnt, "allowed.log");
  ASSERT_NE(allowed, nullptr);
  ASSERT_TRUE(WaitFor([&] { return Sockets().size() == 1; }, std::chrono::seconds(10)));
  RunResult served = as_nobody({"report", allowed_mnt});
  EXPECT_EQ(served.exit_code, 0) << served.err;
  EXPECT_TRUE(served.out.starts_with("mount " + allowed_mnt + ": ")) << served.out;
  EXPECT_EQ(ReadAll(allowed->log_path()).find("refused a connection"), std::string::npos);
  UnmountAndWait(allowed_mnt, allowed);
}

}  // namespace
}  // namespace lakecache::cli_mount_test
