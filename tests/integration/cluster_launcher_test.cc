// `lakecache cluster up` / `cluster down` end to end over s3rver: a real master and real workers,
// what `up` prints for scripts, that its servers never hold the caller's pipes, and that nothing of
// a cluster keeps running after `down` or after a failed `up`. `cluster status` against such a
// cluster, against no master and against an unreachable one.
//
// Stopped servers are orphans; where PID 1 does not reap them they stay zombies, so "gone" below
// means "no /proc entry, or a zombie".
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"
#include "security/auth.h"
#include "support/fuse_mounts.h"
#include "support/test_servers.h"
#include "support/wait_for.h"

extern char** environ;

// Its own namespace: the files of integration_tests are compiled in unity batches.
namespace lakecache::cluster_launcher_test {
namespace {

namespace fs = std::filesystem;
using testing::ProcessesMentioning;
using testing::RunCommand;
using testing::RunResult;
using testing::TempDir;
using Clock = std::chrono::steady_clock;

constexpr char kBucket[] = "lake";
constexpr char kMissingBucket[] = "no-such-bucket";
// `up` itself gives up after 20 s (master) + 30 s (workers) + 5 s (stopping).
constexpr auto kUpTimeout = std::chrono::seconds(90);
constexpr auto kGoneTimeout = std::chrono::seconds(15);
// Once `up` has exited, how long its pipes may stay open (by a server that inherited them).
constexpr auto kEofAfterExit = std::chrono::seconds(5);

// Left out of every lakecache run's environment: credentials and endpoints come from the config.
const std::vector<std::string>& CleanEnv() {
  static const std::vector<std::string> env = {
      "-AWS_ACCESS_KEY_ID", "-AWS_SECRET_ACCESS_KEY", "-AWS_ENDPOINT_URL",     "-AWS_SESSION_TOKEN",
      "-AWS_PROFILE",       "-LAKECACHE_MASTER",      "-LAKECACHE_CREDENTIALS"};
  return env;
}

// This process's environment less CleanEnv()'s names, as "NAME=value" entries.
std::vector<std::string> CleanEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    bool removed = false;
    for (const std::string& name : CleanEnv()) {
      removed = removed || entry.starts_with(name.substr(1) + "=");
    }
    if (!removed) env.push_back(entry);
  }
  return env;
}

struct PipedRun {
  int exit_code = -1;  // 128 + signal when killed; -1 when it did not finish in time
  std::string out;
  std::string err;
  bool reached_eof = false;  // both pipes closed: no process still holds them
};

int ExitCode(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  return WIFSIGNALED(wait_status) ? 128 + WTERMSIG(wait_status) : -1;
}

// Reads what is there on the open pipes of `fds` into `sinks`; closes a pipe at EOF.
void DrainPipes(pollfd* fds, std::string* sinks[2]) {
  if (::poll(fds, 2, 50) <= 0) return;
  char buf[4096];
  for (int i = 0; i < 2; ++i) {
    if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
    if (n > 0) {
      sinks[i]->append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      ::close(fds[i].fd);
      fds[i].fd = -1;
    }
  }
}

// Runs argv with stdout and stderr on pipes and reads both to EOF, as `out=$(lakecache ...)` in a
// shell does: a child that kept either pipe open would hold the caller until `timeout`.
PipedRun RunReadingToEof(const std::vector<std::string>& argv, std::chrono::seconds timeout) {
  PipedRun run;
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env = CleanEnvironment();
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return run;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (::dup2(null_fd, 0) < 0 || ::dup2(out[1], 1) < 0 || ::dup2(err[1], 2) < 0) ::_exit(126);
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&run.out, &run.err};
  auto deadline = Clock::now() + timeout;
  int wait_status = 0;
  bool exited = false;
  while ((fds[0].fd >= 0 || fds[1].fd >= 0) && Clock::now() < deadline) {
    DrainPipes(fds, sinks);
    if (!exited && ::waitpid(pid, &wait_status, WNOHANG) == pid) {
      exited = true;
      deadline = std::min(deadline, Clock::now() + kEofAfterExit);
    }
  }
  run.reached_eof = fds[0].fd < 0 && fds[1].fd < 0;
  for (pollfd& p : fds) {
    if (p.fd >= 0) ::close(p.fd);
  }
  while (!exited && Clock::now() < deadline) {
    exited = ::waitpid(pid, &wait_status, WNOHANG) == pid;
    if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!exited) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, &wait_status, 0);
    return run;
  }
  run.exit_code = ExitCode(wait_status);
  return run;
}

bool Gone(pid_t pid) { return testing::ProcessGone(pid); }

bool GoneWithin(pid_t pid, std::chrono::seconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (!Gone(pid)) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// "NAME PID" lines of DIR/cluster.pids.
std::vector<std::pair<std::string, pid_t>> ReadPids(const std::string& dir) {
  std::ifstream in(dir + "/cluster.pids");
  std::vector<std::pair<std::string, pid_t>> out;
  std::string name;
  pid_t pid = 0;
  while (in >> name >> pid) out.emplace_back(name, pid);
  return out;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The number of live workers the master at `address` lists; -1 when it does not answer.
// `credentials`: the folder `cluster up --dir` made (TLS and the admin role).
int WorkersListedBy(const std::string& address, const std::string& credentials) {
  auto admin = security::ClusterCredentials::Open(credentials, security::Role::kAdmin, "the test");
  if (!admin.ok()) return -2;
  auto stub = rpc::MasterService::NewStub(security::MasterChannel(address, admin->get()));
  grpc::ClientContext context;
  rpc::SetTimeout(&context, std::chrono::seconds(5));
  rpc::ClusterView view;
  grpc::Status s = stub->GetClusterView(&context, rpc::ClusterViewRequest(), &view);
  return s.ok() ? view.workers_size() : -1;
}

class ClusterLauncherTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto started = testing::S3rver::Start({.buckets = {kBucket}});
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started).value().release();
    ASSERT_TRUE(server_->PutObjects(kBucket, {{"data/a.txt", "hello\n"}}).ok());
    config_ = WriteConfig("lake.yaml", kBucket);
    missing_bucket_config_ = WriteConfig("missing.yaml", kMissingBucket);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    scratch_ = std::make_unique<TempDir>("lakecache-cluster");
    // The servers get the folder's canonical path; so do the expectations on their output.
    dir_ = fs::canonical(scratch_->path()).string() + "/cluster";
  }

  // Whatever a failed case left mounted or running: the mounts, `down`, then SIGKILL to anything
  // still naming the folder.
  void TearDown() override {
    for (const std::string& mnt : mounts_) {
      Status unmounted = testing::UnmountForTest(mnt);
      EXPECT_TRUE(unmounted.ok()) << unmounted.ToString();
    }
    if (fs::exists(dir_ + "/cluster.pids")) Lc({"cluster", "down", "--dir", dir_});
    for (pid_t pid : ProcessesMentioning(dir_)) {
      ADD_FAILURE() << "pid " << pid << " of " << dir_ << " still running after the test";
      ::kill(pid, SIGKILL);
    }
    scratch_.reset();
  }

  // A config with one namespace over `bucket` of the suite's s3rver.
  static std::string WriteConfig(const std::string& name, const std::string& bucket) {
    std::string secret_file = server_->dir() + "/secret";
    EXPECT_TRUE(testing::WriteFile(secret_file, "S3RVER\n").ok());
    std::string path = server_->dir() + "/" + name;
    EXPECT_TRUE(testing::WriteFile(path, "namespaces:\n  lake:\n    uri: s3://" + bucket +
                                             "\n    endpoint: " + server_->endpoint() +
                                             "\n    path_style: true\n    access_key: S3RVER\n"
                                             "    secret_key_file: " +
                                             secret_file + "\n")
                    .ok());
    return path;
  }

  static RunResult Lc(const std::vector<std::string>& args,
                      const std::vector<std::string>& extra_env = {}) {
    std::vector<std::string> argv = {LAKECACHE_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> env = CleanEnv();
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    RunResult r = RunCommand(argv, env, kUpTimeout);
    EXPECT_FALSE(r.timed_out) << testing::JoinArgv(argv) << "\n" << r.err;
    return r;
  }

  // `cluster up` with small caches, its output read to EOF.
  PipedRun Up(int workers, const std::string& config) {
    return RunReadingToEof(
        {LAKECACHE_BINARY, "--config", config, "cluster", "up", "--dir", dir_, "--workers",
         std::to_string(workers), "--cache-size", "64MiB", "--mem-cache", "32MiB"},
        kUpTimeout);
  }

  // A fresh empty folder in the scratch folder, unmounted by TearDown if still mounted.
  std::string Mountpoint(const std::string& name) {
    std::string path = fs::canonical(scratch_->path()).string() + "/" + name;
    fs::create_directories(path);
    mounts_.push_back(path);
    return path;
  }

  static bool CanMount() { return ::geteuid() == 0 && fs::exists("/dev/fuse"); }

  std::string dir_;
  std::unique_ptr<TempDir> scratch_;
  std::vector<std::string> mounts_;
  static inline testing::S3Server* server_ = nullptr;
  static inline std::string config_;
  static inline std::string missing_bucket_config_;
};

TEST_F(ClusterLauncherTest, UpWithoutConfigExitsTwo) {
  RunResult r = Lc({"cluster", "up", "--dir", dir_});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--config"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ + "/cluster.pids"));
}

TEST_F(ClusterLauncherTest, UpRejectsBadCacheSizeBeforeStartingAnything) {
  RunResult r = Lc({"--config", config_, "cluster", "up", "--dir", dir_, "--cache-size", "lots"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--cache-size"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ + "/cluster.pids"));
  EXPECT_FALSE(fs::exists(dir_ + "/master.log"));
}

TEST_F(ClusterLauncherTest, DownOfMissingFolderExitsTwo) {
  RunResult r = Lc({"cluster", "down", "--dir", dir_ + "/nope"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(dir_ + "/nope"), std::string::npos) << r.err;
}

TEST_F(ClusterLauncherTest, DownWithoutClusterSaysNothingIsRunning) {
  fs::create_directories(dir_);
  RunResult r = Lc({"cluster", "down", "--dir", dir_});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("no cluster is running in"), std::string::npos) << r.out;
}

// A pid in cluster.pids may since belong to anything: `down` must not signal it.
TEST_F(ClusterLauncherTest, DownNeverSignalsAProcessThatIsNotTheClusters) {
  fs::create_directories(dir_);
  auto sleeper = testing::ChildProcess::Start({"sleep", "60"}, scratch_->path() + "/sleep.log");
  ASSERT_TRUE(sleeper.ok()) << sleeper.status().ToString();
  pid_t pid = (*sleeper)->pid();
  ASSERT_TRUE(testing::WriteFile(
                  dir_ + "/cluster.pids",
                  "master " + std::to_string(pid) + "\nworker-1 " + std::to_string(pid) + "\n")
                  .ok());
  RunResult r = Lc({"cluster", "down", "--dir", dir_});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("was not running"), std::string::npos) << r.out;
  EXPECT_TRUE((*sleeper)->Running());
  EXPECT_FALSE(fs::exists(dir_ + "/cluster.pids"));
}

TEST_F(ClusterLauncherTest, UpReturnsOnceMasterListsAllWorkersWithStdoutOnAPipe) {
  auto start = Clock::now();
  PipedRun up = Up(3, config_);
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  ASSERT_TRUE(up.reached_eof) << "a server kept up's stdout or stderr open\n" << up.err;
  ASSERT_EQ(up.exit_code, 0) << up.err;
  std::cout << "cluster up with 3 workers: " << took.count() << " ms\n";

  std::vector<std::string> lines = Lines(up.out);
  ASSERT_EQ(lines.size(), 6u) << up.out;  // the servers, the credentials line, the address
  EXPECT_NE(lines[4].find("--credentials " + dir_), std::string::npos) << lines[4];
  EXPECT_TRUE(fs::exists(dir_ + "/ca.crt") && fs::exists(dir_ + "/client.token"));
  const std::string& address = lines.back();
  EXPECT_TRUE(std::regex_match(address, std::regex(R"(127\.0\.0\.1:[0-9]+)"))) << address;
  EXPECT_EQ(WorkersListedBy(address, dir_), 3);

  std::vector<std::pair<std::string, pid_t>> pids = ReadPids(dir_);
  ASSERT_EQ(pids.size(), 4u);
  std::vector<std::string> names = {"master", "worker-1", "worker-2", "worker-3"};
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(pids[i].first, names[i]);
    EXPECT_FALSE(Gone(pids[i].second)) << names[i];
    std::string log = dir_ + "/" + names[i] + ".log";
    EXPECT_TRUE(fs::exists(log)) << log;
    std::regex line(names[i] + R"( 127\.0\.0\.1:[0-9]+ pid )" + std::to_string(pids[i].second) +
                    " log " + log);
    EXPECT_TRUE(std::regex_match(lines[i], line)) << lines[i];
  }
  EXPECT_EQ(lines[0], "master " + address + " pid " + std::to_string(pids[0].second) + " log " +
                          dir_ + "/master.log");
}

TEST_F(ClusterLauncherTest, SecondUpInSameFolderIsRefused) {
  PipedRun first = Up(1, config_);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  std::string address = Lines(first.out).back();
  pid_t master = ReadPids(dir_).at(0).second;

  PipedRun second = Up(1, config_);
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.err.find("a cluster is already running in"), std::string::npos) << second.err;
  EXPECT_NE(second.err.find("master pid " + std::to_string(master)), std::string::npos)
      << second.err;
  EXPECT_NE(second.err.find("lakecache cluster down --dir"), std::string::npos) << second.err;
  EXPECT_EQ(WorkersListedBy(address, dir_), 1) << "the refused up disturbed the running cluster";
  EXPECT_EQ(ReadPids(dir_).at(0).second, master);
}

TEST_F(ClusterLauncherTest, DownStopsEveryProcessAndSecondDownFindsNothing) {
  PipedRun up = Up(2, config_);
  ASSERT_EQ(up.exit_code, 0) << up.err;
  std::vector<std::pair<std::string, pid_t>> pids = ReadPids(dir_);
  ASSERT_EQ(pids.size(), 3u);

  RunResult down = Lc({"cluster", "down", "--dir", dir_});
  EXPECT_EQ(down.exit_code, 0) << down.err;
  for (const auto& [name, pid] : pids) {
    EXPECT_NE(down.out.find(name + " (pid " + std::to_string(pid) + ")"), std::string::npos)
        << down.out;
    EXPECT_TRUE(GoneWithin(pid, kGoneTimeout)) << name << " (pid " << pid << ") still running";
  }
  EXPECT_FALSE(fs::exists(dir_ + "/cluster.pids"));
  EXPECT_FALSE(fs::exists(dir_ + "/master.addr"));
  EXPECT_FALSE(fs::exists(dir_ + "/worker-1.addr"));
  EXPECT_TRUE(fs::exists(dir_ + "/master.log"));
  EXPECT_TRUE(fs::exists(dir_ + "/worker-2/cache"));

  RunResult again = Lc({"cluster", "down", "--dir", dir_});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("no cluster is running in"), std::string::npos) << again.out;
}

TEST_F(ClusterLauncherTest, FailedUpReportsTheMasterAndLeavesNothingRunning) {
  PipedRun up = Up(2, missing_bucket_config_);
  ASSERT_TRUE(up.reached_eof) << up.err;
  EXPECT_NE(up.exit_code, 0);
  EXPECT_EQ(up.out, "");
  EXPECT_NE(up.err.find("master"), std::string::npos) << up.err;
  EXPECT_NE(up.err.find(dir_ + "/master.log"), std::string::npos) << up.err;
  EXPECT_NE(up.err.find(kMissingBucket), std::string::npos) << "no reason given:\n" << up.err;
  EXPECT_FALSE(fs::exists(dir_ + "/cluster.pids"));
  EXPECT_EQ(ProcessesMentioning(dir_), std::vector<pid_t>());
}

TEST_F(ClusterLauncherTest, StatusListsEveryWorkerAndAKilledOneAsUnreachable) {
  PipedRun up = Up(2, config_);
  ASSERT_EQ(up.exit_code, 0) << up.err;
  std::vector<std::string> lines = Lines(up.out);
  ASSERT_EQ(lines.size(), 5u) << up.out;
  const std::string& master = lines.back();
  std::set<std::string> started;  // from "worker-N ADDRESS pid PID log FILE"
  for (size_t i = 1; i <= 2; ++i) {
    std::string name, address;
    std::istringstream(lines[i]) >> name >> address;
    started.insert(address);
  }

  // TLS by default: without the folder `up` wrote, the master cannot be asked, and the command
  // says which flag it lacks (a usage error).
  RunResult plain = Lc({"cluster", "status", "--json", "--master", master});
  EXPECT_EQ(plain.exit_code, 2) << plain.out << plain.err;
  EXPECT_NE(plain.err.find("pass --credentials DIR"), std::string::npos) << plain.err;
  RunResult r = Lc({"cluster", "status", "--json", "--master", master, "--credentials", dir_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json status = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(status.is_object() && status.contains("workers")) << r.out;
  EXPECT_GT(status.value("epoch", uint64_t{0}), 0u) << r.out;
  std::set<std::string> listed;
  for (const nlohmann::json& w : status["workers"]) {
    listed.insert(w.value("address", ""));
    EXPECT_TRUE(w.value("reachable", false)) << w.dump();
    EXPECT_FALSE(w.value("id", "").empty()) << w.dump();
    EXPECT_GT(w.value("capacity_bytes", uint64_t{0}), 0u) << w.dump();
    EXPECT_EQ(w.value("fetches", uint64_t{1}), 0u) << w.dump();
    EXPECT_EQ(w.value("tiers", nlohmann::json::array()).size(), 2u) << w.dump();  // memory, disk
  }
  EXPECT_EQ(listed, started) << r.out;

  // LAKECACHE_MASTER stands in for --master; the table has a row per worker.
  std::vector<std::string> env = CleanEnv();
  env.push_back(std::string("LAKECACHE_MASTER=") + master);
  env.push_back("LAKECACHE_CREDENTIALS=" + dir_);
  RunResult table = RunCommand({LAKECACHE_BINARY, "cluster", "status"}, env, kUpTimeout);
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_TRUE(table.out.starts_with("epoch ")) << table.out;
  for (const std::string& address : started) {
    EXPECT_NE(table.out.find(address), std::string::npos) << table.out;
  }

  // The master lists a SIGKILLed worker until its heartbeat timeout (5 s by default): a row that
  // says unreachable, not a failure of the command.
  pid_t worker = ReadPids(dir_).at(1).second;
  ASSERT_EQ(::kill(worker, SIGKILL), 0);
  ASSERT_TRUE(GoneWithin(worker, kGoneTimeout));
  RunResult after = Lc({"cluster", "status", "--master", master, "--credentials", dir_});
  EXPECT_EQ(after.exit_code, 0) << after.err;
  EXPECT_NE(after.out.find("unreachable"), std::string::npos) << after.out;
}

TEST_F(ClusterLauncherTest, StatusExitsOneNamingAnUnreachableMasterAndTwoWithoutOne) {
  std::string nobody = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  // At once, not at the end of its --timeout (made far longer than the bound, to tell them apart).
  auto start = Clock::now();
  RunResult r = Lc({"--timeout", "10m", "cluster", "status", "--json", "--master", nobody});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("master at " + nobody), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_LT(Clock::now() - start, testing::kWaitTimeout);

  RunResult none = Lc({"cluster", "status"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("--master"), std::string::npos) << none.err;
  EXPECT_NE(none.err.find("LAKECACHE_MASTER"), std::string::npos) << none.err;
}

// `down` unmounts the cluster's mounts before it stops the servers, waits for them and says so; a
// mount of something else stays, and a busy mount of the cluster is detached lazily, naming who
// keeps it busy. Once let go of, the detached mount ends with its processes.
TEST_F(ClusterLauncherTest, DownUnmountsTheClustersMountsFirst) {
  ASSERT_TRUE(CanMount()) << "needs root and /dev/fuse";
  PipedRun up = Up(1, config_);
  ASSERT_EQ(up.exit_code, 0) << up.err;
  std::string master = Lines(up.out).back();
  std::vector<std::string> env = {"LAKECACHE_RUN_DIR=" + scratch_->path() + "/run"};
  std::string log = scratch_->path() + "/mounts.log";
  std::string idle = Mountpoint("idle");
  std::string busy = Mountpoint("busy");
  for (const std::string& mnt : {idle, busy}) {
    RunResult m = Lc({"--log-file", log, "mount", "--master", master, "--credentials", dir_, mnt,
                      "--background"},
                     env);
    ASSERT_EQ(m.exit_code, 0) << m.err;
  }
  std::string local = scratch_->path() + "/local";
  fs::create_directories(local);
  ASSERT_TRUE(testing::WriteFile(local + "/x.txt", "x").ok());
  std::string other = Mountpoint("other");
  RunResult own = Lc({"--log-file", log, "mount", "file://" + local, other, "--background"}, env);
  ASSERT_EQ(own.exit_code, 0) << own.err;
  int fd = ::open((busy + "/lake/data/a.txt").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << std::strerror(errno);

  RunResult down = Lc({"cluster", "down", "--dir", dir_}, env);
  EXPECT_EQ(down.exit_code, 0) << down.out << down.err;
  size_t unmounted = down.out.find("unmounted " + idle + " (a mount of this cluster)\n");
  EXPECT_NE(unmounted, std::string::npos) << down.out;
  EXPECT_LT(unmounted, down.out.find("stopped master")) << down.out;
  EXPECT_FALSE(testing::IsMounted(idle));
  EXPECT_EQ(ProcessesMentioning(idle), std::vector<pid_t>()) << "down returned before they exited";
  EXPECT_NE(
      down.err.find("lakecache: warning: " + busy + " (a mount of this cluster) is busy: pid " +
                    std::to_string(::getpid()) + " ("),
      std::string::npos)
      << down.err;
  EXPECT_NE(down.err.find(") has a file open there; detached it lazily"), std::string::npos)
      << down.err;
  EXPECT_FALSE(testing::IsMounted(busy));
  EXPECT_TRUE(testing::IsMounted(other)) << "not a mount of the cluster";
  EXPECT_EQ(down.out.find(other), std::string::npos) << down.out;

  ::close(fd);
  auto deadline = Clock::now() + kGoneTimeout;
  while (!ProcessesMentioning(busy).empty() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(ProcessesMentioning(busy), std::vector<pid_t>());
  EXPECT_EQ(Lc({"umount", other}, env).exit_code, 0);
}

// `up --metrics-listen` gives the master its status page and /metrics, and says where they are
// and how to present the metrics token they ask for.
TEST_F(ClusterLauncherTest, UpWithMetricsListenPrintsTheStatusPageAndHowToReadIt) {
  std::string listen = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  PipedRun up =
      RunReadingToEof({LAKECACHE_BINARY, "--config", config_, "cluster", "up", "--dir", dir_,
                       "--cache-size", "64MiB", "--mem-cache", "32MiB", "--metrics-listen", listen},
                      kUpTimeout);
  ASSERT_EQ(up.exit_code, 0) << up.err;
  std::vector<std::string> lines = Lines(up.out);
  ASSERT_EQ(lines.size(), 5u) << up.out;  // master, worker, credentials, status page, address
  std::string token = dir_ + "/metrics.token";
  EXPECT_EQ(lines[3], "status page http://" + listen + "/ and /metrics, with the token in " +
                          token +
                          " as the password (any user name) or as \"Authorization: Bearer "
                          "TOKEN\"");
  EXPECT_TRUE(std::regex_match(lines.back(), std::regex(R"(127\.0\.0\.1:[0-9]+)"))) << up.out;

  auto curl = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, {}, std::chrono::seconds(10)).out;
  };
  EXPECT_EQ(curl({"http://" + listen + "/"}), "401");
  // The token goes to curl in files, never on a command line.
  std::string secret;
  std::ifstream(token) >> secret;
  std::string basic = scratch_->path() + "/basic.curlrc";
  std::string bearer = scratch_->path() + "/bearer.header";
  ASSERT_TRUE(testing::WriteFile(basic, "user = \":" + secret + "\"\n").ok());
  ASSERT_TRUE(testing::WriteFile(bearer, "Authorization: Bearer " + secret + "\n").ok());
  EXPECT_EQ(curl({"-K", basic, "http://" + listen + "/"}), "200");
  EXPECT_EQ(curl({"-H", "@" + bearer, "http://" + listen + "/metrics"}), "200");
}

// A --metrics-listen whose page could not be found (port 0) or guarded (--insecure beyond
// loopback) is refused before anything starts.
TEST_F(ClusterLauncherTest, UpRefusesAMetricsListenItCannotPrintOrGuard) {
  RunResult any_port =
      Lc({"--config", config_, "cluster", "up", "--dir", dir_, "--metrics-listen", "127.0.0.1:0"});
  EXPECT_EQ(any_port.exit_code, 2);
  EXPECT_NE(any_port.err.find("--metrics-listen 127.0.0.1:0: give a port"), std::string::npos)
      << any_port.err;
  RunResult open = Lc({"--config", config_, "cluster", "up", "--dir", dir_, "--insecure",
                       "--metrics-listen", "0.0.0.0:9460"});
  EXPECT_EQ(open.exit_code, 2);
  EXPECT_NE(open.err.find("`cluster up --insecure` serves on loopback only"), std::string::npos)
      << open.err;
  EXPECT_FALSE(fs::exists(dir_ + "/cluster.pids"));
  EXPECT_FALSE(fs::exists(dir_ + "/master.log"));
}

}  // namespace
}  // namespace lakecache::cluster_launcher_test
