// What the CLI tests share: one s3rver per program with bucket "cli" and a few objects, the
// `lakecache` binary run with its endpoint and credentials, a scratch folder per test, and FUSE
// mounts (foreground children or background daemons) that TearDown unmounts whatever happened.
//
// Mounts need root and /dev/fuse, as they have here; the cases that mount say so when missing.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/fuse_mounts.h"
#include "support/process.h"
#include "support/test_servers.h"

namespace lakecache::testing {

class CliFixture : public ::testing::Test {
 protected:
  using Clock = std::chrono::steady_clock;
  static constexpr char kBucket[] = "cli";
  static constexpr char kSecret[] = "S3RVER";              // s3rver's fixed secret; never printed
  static constexpr size_t kBigSize = 5 * 1024 * 1024 + 3;  // data/big.bin: two 4 MiB blocks

  static void SetUpTestSuite() {
    auto started = S3rver::Start();
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started).value().release();
    ASSERT_TRUE(server_->CreateBucket(kBucket).ok());
    std::string big(kBigSize, '\0');
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i % 251);
    Status s = server_->PutObjects(kBucket, {{"data/a.txt", "hello world\n"},
                                             {"data/sub/b.txt", "bee"},
                                             {"data/big.bin", big},
                                             {"data/with space.txt", "spaced"},
                                             {"top.txt", "top"}});
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(server_, nullptr) << "the suite's s3rver did not start";
    scratch_ = std::make_unique<TempDir>("lakecache-cli");
    run_dir_ = Folder("run");
  }

  void TearDown() override {
    StopAll();
    scratch_.reset();
  }

  // Unmounts every mountpoint and stops every child. Idempotent.
  void StopAll() {
    for (const std::string& path : mountpoints_) {
      Status unmounted = UnmountForTest(path);
      EXPECT_TRUE(unmounted.ok()) << unmounted.ToString();
    }
    mountpoints_.clear();
    children_.clear();  // stops them
  }

  static bool CanMount() { return ::geteuid() == 0 && std::filesystem::exists("/dev/fuse"); }

  // A fresh folder in the test's scratch folder.
  std::string Folder(const std::string& name) const {
    std::string path = scratch_->path() + "/" + name;
    std::filesystem::create_directories(path);
    return path;
  }

  // A fresh empty folder that TearDown unmounts whatever got mounted there.
  std::string Mountpoint(const std::string& name = "mnt") {
    std::string path = Folder(name + "-" + std::to_string(mountpoints_.size()));
    mountpoints_.push_back(path);
    return path;
  }

  // The server's endpoint and credentials in the environment, control sockets in run_dir_, no
  // LAKECACHE_MASTER; then `extra` ("NAME=value" or "-NAME"), which wins.
  std::vector<std::string> Env(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> env = {"AWS_ACCESS_KEY_ID=S3RVER",
                                    std::string("AWS_SECRET_ACCESS_KEY=") + kSecret,
                                    "AWS_ENDPOINT_URL=" + server_->endpoint(),
                                    "LAKECACHE_RUN_DIR=" + run_dir_, "-LAKECACHE_MASTER"};
    env.insert(env.end(), extra.begin(), extra.end());
    return env;
  }

  static std::vector<std::string> Argv(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {LAKECACHE_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

  // Runs lakecache to completion with Env().
  RunResult Lc(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
               std::chrono::seconds timeout = std::chrono::seconds(60)) {
    RunResult r = RunCommand(Argv(args), Env(env), timeout);
    EXPECT_FALSE(r.timed_out) << JoinArgv(Argv(args)) << "\n" << r.err;
    return r;
  }

  // `lakecache umount MNT`, which must succeed; on failure, what it said and the end of the
  // mount's log (`log`, when it wrote one).
  void Umount(const std::string& mnt, const std::string& log = "") {
    RunResult down = Lc({"umount", mnt});
    EXPECT_EQ(down.exit_code, 0) << down.err
                                 << (log.empty()
                                         ? ""
                                         : "\nthe mount's log:\n" + ReadFileTail(log, 4096));
  }

  std::string WriteConfig(const std::string& name, const std::string& text) const {
    std::string path = scratch_->path() + "/" + name;
    EXPECT_TRUE(WriteFile(path, text).ok());
    return path;
  }

  // A config with namespace `cli` over the bucket, credentials included, and `extra` lines.
  std::string BucketConfig(const std::string& extra = "") const {
    return WriteConfig(
        "lake.yaml",
        "namespaces:\n  cli:\n    uri: s3://cli/\n    endpoint: " + server_->endpoint() +
            "\n    access_key: S3RVER\n    secret_key: S3RVER\n" + extra);
  }

  // Starts lakecache `args` as a child (stdout and stderr to LOG in the scratch folder) with
  // Env(env), stopped by TearDown.
  ChildProcess* Start(const std::vector<std::string>& args, const std::string& log,
                      const std::vector<std::string>& env = {}) {
    auto started = ChildProcess::Start(Argv(args), scratch_->path() + "/" + log, Env(env));
    if (!started.ok()) {
      ADD_FAILURE() << started.status().ToString();
      return nullptr;
    }
    children_.push_back(std::move(started).value());
    return children_.back().get();
  }

  // A foreground `lakecache [global] mount ARGS` of `mountpoint`, logging to LOG; returns once
  // /proc/mounts lists it, or nullptr after recording a failure.
  ChildProcess* StartMount(const std::vector<std::string>& args, const std::string& mountpoint,
                           const std::string& log) {
    ChildProcess* child = Start(args, log);
    if (child == nullptr) return nullptr;
    bool mounted = WaitFor([&] { return IsMounted(mountpoint) || !child->Running(); },
                           std::chrono::seconds(20));
    if (!mounted || !IsMounted(mountpoint)) {
      ADD_FAILURE() << "not mounted at " << mountpoint << ": " << JoinArgv(Argv(args)) << "\n"
                    << child->LogTail();
      return nullptr;
    }
    return child;
  }

  // Unmounts with `lakecache umount` and waits for the foreground mount `child` to exit.
  void UnmountAndWait(const std::string& mountpoint, ChildProcess* child) {
    RunResult r = Lc({"umount", mountpoint});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(WaitFor([&] { return !child->Running(); }, std::chrono::seconds(20)))
        << "the mount of " << mountpoint << " did not exit";
  }

  // Polls `done` every 20 ms until it holds (true) or `timeout` passes (false).
  static bool WaitFor(const std::function<bool()>& done, std::chrono::seconds timeout) {
    auto deadline = Clock::now() + timeout;
    while (!done()) {
      if (Clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }

  static std::string ReadAll(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  static size_t Count(const std::string& text, const std::string& part) {
    size_t n = 0;
    for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
    return n;
  }

  static inline S3rver* server_ = nullptr;
  std::unique_ptr<TempDir> scratch_;
  std::string run_dir_;  // LAKECACHE_RUN_DIR: where mounts put their control sockets
  std::vector<std::string> mountpoints_;
  std::vector<std::unique_ptr<ChildProcess>> children_;
};

}  // namespace lakecache::testing
