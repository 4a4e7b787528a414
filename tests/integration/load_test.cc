// `lakecache load`, `report`, `free` and `stat` (docs/admin.md) end to end, against a cluster of
// real processes (master, three workers, a cluster FUSE mount) and against a standalone mount, over
// s3rver. Every object-store request is counted by a proxy between lakecache and s3rver
// (support/counting_proxy.h), not by lakecache's own counters; the same proxy slows the store down
// (a load to interrupt, or to kill a worker under) and refuses every connection (the store down);
// the store also goes down by SIGSTOP of s3rver (connections accepted, never answered).
//
// The namespace `ds` holds a tree `data/` of 28 files (about 20 MiB; 256 KiB blocks, so most files
// span several blocks and most end in a partial one; one empty file) in nested folders, and a few
// objects outside it that no test loads. Needs root and /dev/fuse.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/background_command.h"
#include "support/cluster_procs.h"
#include "support/counting_proxy.h"
#include "support/fuse_mounts.h"
#include "support/test_data.h"
#include "support/test_servers.h"

// Its own namespace: the files of integration_tests are compiled in unity batches.
namespace lakecache::load_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::BackgroundCommand;
using testing::ChildProcess;
using testing::CountingProxy;
using testing::FileBytes;
using testing::IsMounted;
using testing::MakeBytes;
using testing::ProxyCounts;
using testing::ReadWholeFile;
using testing::RunCommand;
using testing::RunResult;
using testing::TempDir;
using Clock = std::chrono::steady_clock;
using Objects = std::vector<std::pair<std::string, std::string>>;

constexpr uint64_t kKiB = 1 << 10;
constexpr uint64_t kMiB = 1 << 20;
constexpr char kNs[] = "ds";  // the namespace, over the bucket of the same name
constexpr uint64_t kBlock = 256 * kKiB;
constexpr char kTreeKey[] = "data";       // the tree the tests load, within the bucket
constexpr char kTreePath[] = "/ds/data";  // ... and as the CLI names it in the cluster
// Through the proxy at this rate a load of the whole tree takes about 5 s: long enough to act in.
constexpr uint64_t kSlowBandwidth = 4 * kMiB;
constexpr auto kLoadTimeout = std::chrono::seconds(120);
// The TTL of the tests that let listings expire, and how long a refused connection is held then.
constexpr auto kShortTtl = std::chrono::seconds(1);
constexpr auto kRefusalHold = std::chrono::seconds(30);
// A reader's command with the store down must return within this: less than what one that waited
// for a store request would take (kRefusalHold while refusing; the HTTP client's 30 s stall
// timeout while stopped), however slow the machine.
constexpr auto kCacheSpeedBound = std::chrono::seconds(15);

// Every object of the bucket. Every folder holds a file of its own: s3rver's delimiter listing
// skips a folder that holds only folders.
const Objects& Bucket() {
  static const Objects* objects = [] {
    auto* o = new Objects;
    uint64_t seed = 1;
    auto add = [&](const std::string& key, uint64_t size) {
      o->push_back({key, MakeBytes(seed++, size)});
    };
    add("top.txt", 100);
    add("data/README.txt", 1000);
    add("data/empty.bin", 0);
    add("data/train/labels.csv", 5000);
    for (int i = 0; i < 16; ++i) {  // 2 to 5 blocks, most with a partial last block
      char name[64];
      std::snprintf(name, sizeof(name), "data/train/shard-%02d.bin", i);
      add(name, kBlock * (2 + i % 4) + 4099 * i);
    }
    add("data/val/part-0.bin", kBlock - 1);
    add("data/val/part-1.bin", kBlock);
    add("data/val/part-2.bin", kBlock + 1);
    add("data/val/part-3.bin", 100 * kKiB);
    add("data/val/part-4.bin", 3 * kMiB + 7);
    add("data/val/deep/info.txt", 50);
    add("data/val/deep/nested/leaf-0.bin", 10 * kKiB);
    add("data/val/deep/nested/leaf-1.bin", 2 * kBlock + 3);
    add("data/val/deep/nested/more/last.bin", 600 * kKiB);
    add("other/note.txt", 10);
    add("other/outside.bin", kMiB + 5);
    return o;
  }();
  return *objects;
}

uint64_t BlocksOf(uint64_t size) { return (size + kBlock - 1) / kBlock; }

// The files of the tree: path relative to data/ -> content.
const std::map<std::string, std::string>& TreeFiles() {
  static const auto* files = [] {
    auto* f = new std::map<std::string, std::string>;
    std::string prefix = std::string(kTreeKey) + "/";
    for (const auto& [key, content] : Bucket()) {
      if (key.starts_with(prefix)) (*f)[key.substr(prefix.size())] = content;
    }
    return f;
  }();
  return *files;
}

// The folders below data/ (relative), not data/ itself.
std::set<std::string> TreeDirs() {
  std::set<std::string> dirs;
  for (const auto& [rel, content] : TreeFiles()) {
    for (size_t slash = rel.find('/'); slash != std::string::npos;
         slash = rel.find('/', slash + 1)) {
      dirs.insert(rel.substr(0, slash));
    }
  }
  return dirs;
}

uint64_t TreeBytes() {
  uint64_t total = 0;
  for (const auto& [rel, content] : TreeFiles()) total += content.size();
  return total;
}

uint64_t TreeBlocks() {
  uint64_t total = 0;
  for (const auto& [rel, content] : TreeFiles()) total += BlocksOf(content.size());
  return total;
}

size_t EmptyTreeFiles() {
  size_t n = 0;
  for (const auto& [rel, content] : TreeFiles()) n += content.empty() ? 1 : 0;
  return n;
}

// The names directly in folder `rel` of the tree ("" is data/ itself).
std::set<std::string> ChildrenOf(const std::string& rel) {
  std::string prefix = rel.empty() ? "" : rel + "/";
  std::set<std::string> names;
  for (const auto& [path, content] : TreeFiles()) {
    if (!path.starts_with(prefix)) continue;
    std::string rest = path.substr(prefix.size());
    names.insert(rest.substr(0, rest.find('/')));
  }
  return names;
}

// s3rver stopped (SIGSTOP to its process group) for the object's life: connections are accepted
// (the kernel's backlog) and never answered.
class StoppedStore {
 public:
  explicit StoppedStore(pid_t group) : group_(group) {
    EXPECT_EQ(::kill(-group_, SIGSTOP), 0) << std::strerror(errno);
  }
  ~StoppedStore() { ::kill(-group_, SIGCONT); }
  StoppedStore(const StoppedStore&) = delete;
  StoppedStore& operator=(const StoppedStore&) = delete;

 private:
  pid_t group_;
};

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Join(const std::vector<std::string>& lines, size_t max = 20) {
  std::string out;
  for (size_t i = 0; i < lines.size() && i < max; ++i) out += lines[i] + "\n";
  if (lines.size() > max) out += "... and " + std::to_string(lines.size() - max) + " more\n";
  return out;
}

std::string Describe(const RunResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout:\n" + r.out.substr(0, 4000) +
         "\n--- stderr:\n" + r.err.substr(0, 4000);
}

// stdout as one JSON object; records a failure (and returns an empty object) when it is not one.
json ParseJson(const RunResult& r, const std::string& what) {
  json j = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    ADD_FAILURE() << what << ": stdout is not one JSON object; " << Describe(r);
    return json::object();
  }
  return j;
}

// The integer at `pointer` ("/bytes/total") of `j`; -1 when missing or not a number, so that a
// comparison with an expected count fails and shows it.
int64_t Num(const json& j, const std::string& pointer) {
  try {
    const json& v = j.at(json::json_pointer(pointer));
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number()) return static_cast<int64_t>(v.get<double>());
  } catch (const json::exception&) {
  }
  return -1;
}

std::string Str(const json& j, const std::string& pointer) {
  try {
    const json& v = j.at(json::json_pointer(pointer));
    if (v.is_string()) return v.get<std::string>();
  } catch (const json::exception&) {
  }
  return "(missing)";
}

// The array at `pointer` of `j`; empty when missing or not an array.
json Array(const json& j, const std::string& pointer) {
  try {
    const json& v = j.at(json::json_pointer(pointer));
    if (v.is_array()) return v;
  } catch (const json::exception&) {
  }
  return json::array();
}

int64_t I(uint64_t v) { return static_cast<int64_t>(v); }

// Walks `root` (the tree's folder in a mount), stat()ing every entry, and compares names, types
// and sizes with the bucket's tree; then reads every file and compares it byte for byte. Returns
// what went wrong. With `stop_early`, returns at the first error: with the store down, each
// operation that (wrongly) needs it costs a mount's whole retry schedule.
std::vector<std::string> CheckTreeAt(const std::string& root, bool stop_early) {
  std::vector<std::string> errors;
  struct stat st;
  if (::stat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    errors.push_back("stat " + root + ": " + std::strerror(errno) + " (or not a folder)");
    return errors;
  }
  // rel -> size, or -1 for a folder.
  std::map<std::string, int64_t> found;
  std::vector<std::string> pending = {""};
  while (!pending.empty() && !(stop_early && !errors.empty())) {
    std::string rel_dir = pending.back();
    pending.pop_back();
    std::string dir = rel_dir.empty() ? root : root + "/" + rel_dir;
    std::error_code ec;
    fs::directory_iterator it(dir, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      std::string name = it->path().filename().string();
      std::string rel = rel_dir.empty() ? name : rel_dir + "/" + name;
      if (::stat(it->path().c_str(), &st) != 0) {
        errors.push_back("stat " + it->path().string() + ": " + std::strerror(errno));
        if (stop_early) break;
        continue;
      }
      if (S_ISDIR(st.st_mode)) {
        found[rel] = -1;
        pending.push_back(rel);
      } else {
        found[rel] = static_cast<int64_t>(st.st_size);
      }
    }
    if (ec) errors.push_back("list " + dir + ": " + ec.message());
  }
  if (stop_early && !errors.empty()) return errors;
  std::map<std::string, int64_t> want;
  for (const std::string& d : TreeDirs()) want[d] = -1;
  for (const auto& [rel, content] : TreeFiles()) want[rel] = static_cast<int64_t>(content.size());
  for (const auto& [rel, size] : want) {
    auto f = found.find(rel);
    if (f == found.end()) {
      errors.push_back("missing from the listing: " + rel);
    } else if (f->second != size) {
      errors.push_back(rel + ": size " + std::to_string(f->second) + ", want " +
                       std::to_string(size) + " (-1: folder)");
    }
  }
  for (const auto& [rel, size] : found) {
    if (!want.contains(rel)) errors.push_back("listed but not in the bucket: " + rel);
  }
  if (stop_early && !errors.empty()) return errors;
  for (const auto& [rel, content] : TreeFiles()) {
    FileBytes got = ReadWholeFile(root + "/" + rel);
    if (got.error != 0) {
      errors.push_back("read " + rel + ": " + std::strerror(got.error));
    } else if (got.bytes != content) {
      errors.push_back("read " + rel + ": " + std::to_string(got.bytes.size()) +
                       " bytes that differ from the object's " + std::to_string(content.size()));
    }
    if (stop_early && !errors.empty()) return errors;
  }
  return errors;
}

class LoadTest : public testing::ClusterProcessFixture {
 protected:
  static void SetUpTestSuite() {
    auto started = testing::S3rver::Start({.buckets = {kNs}});
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started).value().release();
    Status put = server_->PutObjects(kNs, Bucket());
    if (!put.ok()) TearDownTestSuite();
    ASSERT_TRUE(put.ok()) << put.ToString();
  }

  void SetUp() override {
    SetUpScratch("lakecache-load");
    if (HasFatalFailure()) return;
    run_dir_ = dir_->path() + "/run";
    fs::create_directory(run_dir_);
    // Each test its own proxy: a connection a previous test's servers left open counts nowhere.
    auto proxy = CountingProxy::Start(server_->endpoint());
    ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
    proxy_ = std::move(proxy).value();
    WriteConfig({{kNs, proxy_->endpoint(), "256KiB"}});
  }

  void TearDown() override {
    if (!standalone_mnt_.empty()) {
      Status unmounted = testing::UnmountForTest(standalone_mnt_);
      EXPECT_TRUE(unmounted.ok()) << unmounted.ToString();
      if (standalone_) standalone_->Stop();
      EXPECT_FALSE(IsMounted(standalone_mnt_)) << "stale mount at " << standalone_mnt_;
      standalone_.reset();
    }
    ClusterProcessFixture::TearDown();
    proxy_.reset();  // after the servers: they hold connections to it
  }

  void StartCluster() {
    ClusterProcessFixture::StartCluster(
        {{"64MiB", "256MiB"}, {"64MiB", "256MiB"}, {"64MiB", "256MiB"}});
  }

  // The environment of every CLI run: no master, credentials or endpoint from the caller's, and
  // mount control sockets in the test's folder.
  std::vector<std::string> CliEnv() const {
    return {"-LAKECACHE_MASTER",      "-AWS_ACCESS_KEY_ID",
            "-AWS_SECRET_ACCESS_KEY", "-AWS_SESSION_TOKEN",
            "-AWS_PROFILE",           "-AWS_ENDPOINT_URL",
            "-XDG_RUNTIME_DIR",       "LAKECACHE_RUN_DIR=" + run_dir_};
  }

  static std::vector<std::string> Argv(std::vector<std::string> args) {
    args.insert(args.begin(), LAKECACHE_BINARY);
    return args;
  }

  RunResult Lc(const std::vector<std::string>& args,
               std::chrono::seconds timeout = kLoadTimeout) const {
    return RunCommand(Argv(args), CliEnv(), timeout);
  }

  // `lakecache load PATH -R --json --master ADDR` argv (without the binary).
  std::vector<std::string> ClusterLoad(const std::string& path = kTreePath) const {
    return {"load", path, "-R", "--json", "--master", master_address_};
  }

  // What every complete, failure-free load of the whole tree into the cluster reports.
  void ExpectFullClusterLoad(const json& s) {
    EXPECT_EQ(Str(s, "/path"), kTreePath) << s.dump();
    EXPECT_EQ(Str(s, "/target"), "cluster") << s.dump();
    EXPECT_EQ(Str(s, "/address"), master_address_) << s.dump();
    ExpectFullLoadCounts(s);
  }

  // The counts of a complete, failure-free load of the whole tree (any target).
  void ExpectFullLoadCounts(const json& s) {
    EXPECT_EQ(s.value("complete", false), true) << s.dump();
    EXPECT_EQ(s.value("metadata_only", true), false) << s.dump();
    EXPECT_EQ(Num(s, "/replicas"), 1) << s.dump();
    // Which folders `dirs` counts is not said: those below the loaded one, or also the loaded one,
    // or also the one above it (the namespace's root), whose listing is pinned too.
    int64_t dirs = Num(s, "/dirs");
    EXPECT_TRUE(dirs >= I(TreeDirs().size()) && dirs <= I(TreeDirs().size() + 2))
        << "dirs " << dirs << ", want " << TreeDirs().size() << " (folders below " << kTreePath
        << "), +1 (itself) or +2 (and /" << kNs << ")";
    EXPECT_EQ(Num(s, "/files/total"), I(TreeFiles().size())) << s.dump();
    EXPECT_EQ(Num(s, "/files/failed"), 0) << s.dump();
    EXPECT_EQ(Num(s, "/files/loaded") + Num(s, "/files/already_cached"), I(TreeFiles().size()))
        << s.dump();
    EXPECT_EQ(Num(s, "/bytes/total"), I(TreeBytes())) << s.dump();
    EXPECT_EQ(Num(s, "/bytes/failed"), 0) << s.dump();
    EXPECT_EQ(Num(s, "/bytes/loaded") + Num(s, "/bytes/already_cached"), I(TreeBytes()))
        << s.dump();
    EXPECT_TRUE(Array(s, "/failures").empty()) << s.dump();
  }

  // `lakecache stat PATH --json` (with `extra` flags); records a failure and returns an empty
  // object when it fails.
  json Stat(const std::string& path, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"stat", path, "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    RunResult r = Lc(args, std::chrono::seconds(30));
    EXPECT_EQ(r.exit_code, 0) << "stat " << path << ": " << Describe(r);
    return r.exit_code == 0 ? ParseJson(r, "stat " + path) : json::object();
  }

  // Every file of the tree, stat'ed under `prefix` (kTreePath in the cluster, or a mount's
  // folder), reports all of its blocks cached.
  void ExpectTreeFullyCached(const std::string& prefix, const std::vector<std::string>& extra) {
    for (const auto& [rel, content] : TreeFiles()) {
      json s = Stat(prefix + "/" + rel, extra);
      EXPECT_EQ(Num(s, "/size"), I(content.size())) << rel << ": " << s.dump();
      EXPECT_EQ(Num(s, "/block_size"), I(kBlock)) << rel << ": " << s.dump();
      EXPECT_EQ(Num(s, "/blocks_total"), I(BlocksOf(content.size()))) << rel << ": " << s.dump();
      EXPECT_EQ(Num(s, "/blocks_cached"), Num(s, "/blocks_total")) << rel << ": " << s.dump();
      EXPECT_EQ(Num(s, "/cached_bytes"), I(content.size())) << rel << ": " << s.dump();
    }
  }

  // Waits until the proxy has passed `bytes` more store -> client bytes than at `since`, while
  // `command` runs; false when it ended first or after 60 s.
  bool WaitForStoreBytes(BackgroundCommand& command, const ProxyCounts& since, uint64_t bytes) {
    auto deadline = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < deadline) {
      if ((proxy_->counts() - since).response_bytes >= bytes) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "only " << (proxy_->counts() - since).response_bytes << " of " << bytes
                  << " bytes came from the store within 60 s; stderr so far:\n"
                  << command.Stderr();
    return false;
  }

  // Slows the store down (kSlowBandwidth; the test sets it back to 0), starts a load of the whole
  // tree into the cluster in the background (*load) and waits until a third of the tree's bytes
  // came through the proxy: the load is well under way. Fails fatally when it does not start or
  // get that far.
  void StartSlowClusterLoad(std::unique_ptr<BackgroundCommand>* load) {
    proxy_->SetBandwidth(kSlowBandwidth);
    ProxyCounts before = proxy_->counts();
    auto started = BackgroundCommand::Start(Argv(ClusterLoad()), CliEnv());
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    *load = std::move(started).value();
    ASSERT_TRUE(WaitForStoreBytes(**load, before, TreeBytes() / 3));
  }

  // A standalone mount (`lakecache --config CFG mount MNT`, its own cache dir) of every namespace
  // of the config, through the proxy; returns its mountpoint, "" after recording a failure.
  std::string StartStandaloneMount() {
    standalone_mnt_ = dir_->path() + "/standalone";
    fs::create_directory(standalone_mnt_);
    std::vector<std::string> argv = Argv(
        {"--config", config_, "--log-level", "info", "mount", standalone_mnt_, "--cache-dir",
         dir_->path() + "/standalone-cache", "--cache-size", "256MiB", "--mem-cache", "64MiB"});
    auto started = ChildProcess::Start(argv, dir_->path() + "/standalone.log", CliEnv());
    if (!started.ok()) {
      ADD_FAILURE() << started.status().ToString();
      return "";
    }
    standalone_ = std::move(started).value();
    auto deadline = Clock::now() + std::chrono::seconds(20);
    while (!IsMounted(standalone_mnt_)) {
      if (!standalone_->Running() || Clock::now() > deadline) {
        ADD_FAILURE() << "not mounted at " << standalone_mnt_ << ": " << standalone_->LogTail();
        return "";
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return standalone_mnt_;
  }

  // The namespace with a TTL of kShortTtl, a cluster with the tree loaded and a cluster mount;
  // returns the tree's folder in the mount, "" after recording a failure.
  std::string LoadedClusterMountWithShortTtl() {
    WriteConfig({{kNs, proxy_->endpoint(), "256KiB", std::to_string(kShortTtl.count()) + "s"}});
    StartCluster();
    if (HasFatalFailure()) return "";
    RunResult load = Lc(ClusterLoad());
    EXPECT_EQ(load.exit_code, 0) << Describe(load);
    Mount();
    if (HasFailure()) return "";
    return mountpoint_ + "/" + kNs + "/" + kTreeKey;
  }

  // The same with a standalone mount that the tree is loaded into.
  std::string LoadedStandaloneMountWithShortTtl() {
    WriteConfig({{kNs, proxy_->endpoint(), "256KiB", std::to_string(kShortTtl.count()) + "s"}});
    std::string mnt = StartStandaloneMount();
    if (mnt.empty()) return "";
    std::string tree = mnt + "/" + kNs + "/" + kTreeKey;
    RunResult load = Lc({"load", tree, "-R", "--json"});
    EXPECT_EQ(load.exit_code, 0) << Describe(load) << "\nmount log:\n" << standalone_->LogTail();
    return load.exit_code == 0 ? tree : "";
  }

  enum class Outage { kRefusing, kStopped };

  // With the tree loaded under `tree` (a mount's folder) and its namespace's TTL (kShortTtl) run
  // out, the store goes down (`outage`), and a user lists and reads the tree: `ls -l` of folders
  // at every depth and `cat` of files, twice, a TTL apart. Each must answer at cache speed, and no
  // store request may stand in its path: requests may start in the background (revalidations of
  // the folders above the tree), but every one must still be unanswered when the command returns.
  // While refusing, the proxy resets each connection only after kRefusalHold, so a command that
  // waited for a refused request could not return before it ended.
  void ExpectExpiredTreeReadsAtOnce(const std::string& tree, Outage outage) {
    std::this_thread::sleep_for(kShortTtl + std::chrono::milliseconds(500));
    ProxyCounts before_outage = proxy_->counts();
    std::unique_ptr<StoppedStore> stopped;
    if (outage == Outage::kRefusing) {
      proxy_->SetRefusalHold(kRefusalHold);
      proxy_->SetRefusing(true);
    } else {
      stopped = std::make_unique<StoppedStore>(server_->process().pid());
    }
    for (int round = 0; round < 2; ++round) {
      if (round > 0) std::this_thread::sleep_for(kShortTtl + std::chrono::milliseconds(500));
      for (const std::string& rel :
           {std::string(), std::string("train"), std::string("val/deep/nested/more")}) {
        std::string dir = rel.empty() ? tree : tree + "/" + rel;
        RunResult r = TimedRead({"ls", "-l", dir});
        EXPECT_EQ(r.exit_code, 0) << Describe(r);
        for (const std::string& name : ChildrenOf(rel)) {
          EXPECT_NE(r.out.find(name), std::string::npos) << "ls " << dir << ": no " << name;
        }
      }
      for (const char* rel : {"README.txt", "train/shard-03.bin", "val/deep/nested/leaf-1.bin"}) {
        RunResult r = TimedRead({"cat", tree + "/" + rel});
        EXPECT_EQ(r.exit_code, 0) << Describe(r);
        EXPECT_TRUE(r.out == TreeFiles().at(rel))
            << "cat " << rel << ": " << r.out.size() << " bytes that differ from the object's";
      }
    }
    ProxyCounts during = proxy_->counts() - before_outage;
    std::cout << "store down (" << (outage == Outage::kRefusing ? "refusing" : "stopped")
              << "), requests in the background: " << ToString(during) << "\n";
    // The folders above the tree did revalidate (in the background): the TTL had run out.
    EXPECT_GT(during.requests + during.refused, 0u) << ToString(during);
    proxy_->SetRefusalHold(std::chrono::milliseconds(0));  // releases the held connections
    proxy_->SetRefusing(false);
  }

  // Runs a reader's command (`ls`, `cat`) and checks it took less than kCacheSpeedBound and waited
  // for no store request (see ExpectExpiredTreeReadsAtOnce).
  RunResult TimedRead(const std::vector<std::string>& argv) {
    uint64_t first = proxy_->counts().log_entries();
    auto start = Clock::now();
    RunResult r = RunCommand(argv, {}, std::chrono::seconds(60));
    auto returned = Clock::now();
    double seconds = std::chrono::duration<double>(returned - start).count();
    EXPECT_LT(seconds, std::chrono::duration<double>(kCacheSpeedBound).count())
        << testing::JoinArgv(argv) << " took " << seconds << " s";
    EXPECT_EQ(proxy_->EndedBefore(first, returned), 0u)
        << testing::JoinArgv(argv) << " returned after store requests ended:\n"
        << proxy_->RequestsSince(first);
    return r;
  }

  // The ends of the servers' and the cluster mount's logs, for failure messages.
  std::string ServerLogs() const {
    std::string out;
    std::vector<std::string> names = {"master"};
    for (const testing::WorkerProcess& w : workers_) names.push_back(w.name);
    for (const std::string& name : names) {
      out += "\n--- " + name + ".log:\n" +
             testing::ReadFileTail(dir_->path() + "/" + name + ".log", 1500);
    }
    return out + "\n--- mount.log:\n" + testing::ReadFileTail(dir_->path() + "/mount.log", 1500);
  }

  std::unique_ptr<CountingProxy> proxy_;
  std::string run_dir_;
  std::string standalone_mnt_;
  std::unique_ptr<ChildProcess> standalone_;
};

// 1. After a load, a full listing and read through a cluster mount asks the store for nothing,
//    and works with the store down.
TEST_F(LoadTest, LoadedTreeListsAndReadsWithoutTheStore) {
  StartCluster();
  ASSERT_FALSE(HasFatalFailure());
  ProxyCounts before = proxy_->counts();
  RunResult load = Lc(ClusterLoad());
  ASSERT_EQ(load.exit_code, 0) << Describe(load);
  json summary = ParseJson(load, "load");
  ExpectFullClusterLoad(summary);
  EXPECT_EQ(TotalFetches(), TreeBlocks()) << "each block fetched once, by its owner";
  // The proxy sees the store's traffic (else counting nothing below would prove nothing).
  ProxyCounts loading = proxy_->counts() - before;
  EXPECT_GE(loading.object_gets, TreeFiles().size() - EmptyTreeFiles()) << ToString(loading);
  EXPECT_GT(loading.lists, 0u) << ToString(loading);
  std::cout << "load through the proxy: " << ToString(loading) << "\n";

  before = proxy_->counts();
  uint64_t fetches = TotalFetches();
  Mount();
  ASSERT_FALSE(HasFatalFailure());
  std::string tree = mountpoint_ + "/" + kNs + "/" + kTreeKey;
  std::vector<std::string> errors = CheckTreeAt(tree, /*stop_early=*/false);
  EXPECT_TRUE(errors.empty()) << Join(errors);
  ProxyCounts during = proxy_->counts() - before;
  EXPECT_EQ(during.requests, 0u) << ToString(during) << "\n"
                                 << proxy_->RequestsSince(before.log_entries());
  EXPECT_EQ(during.connections, 0u) << ToString(during);
  EXPECT_EQ(TotalFetches(), fetches);

  // The store down (every connection reset), a fresh mount (nothing in its memory cache or the
  // kernel's page cache): the same walk and reads.
  Unmount();
  proxy_->SetRefusing(true);
  before = proxy_->counts();
  Mount();
  ASSERT_FALSE(HasFatalFailure());
  errors = CheckTreeAt(tree, /*stop_early=*/true);
  EXPECT_TRUE(errors.empty()) << "with the store down: " << Join(errors);
  ProxyCounts down = proxy_->counts() - before;
  EXPECT_EQ(down.refused, 0u) << "something tried to reach the store: " << ToString(down) << "\n"
                              << proxy_->RequestsSince(before.log_entries()) << ServerLogs();
}

// 1b. The TTL of a loaded tree's listings runs out while the store is down: the cluster mount
//     lists and reads the tree at cache speed, waiting for no store request (the master serves
//     the folders above the tree from their last listing and revalidates them in the background).
TEST_F(LoadTest, ExpiredLoadedTreeReadsAtOnceThroughTheClusterWhileTheStoreRefuses) {
  std::string tree = LoadedClusterMountWithShortTtl();
  ASSERT_FALSE(tree.empty());
  ExpectExpiredTreeReadsAtOnce(tree, Outage::kRefusing);
}

TEST_F(LoadTest, ExpiredLoadedTreeReadsAtOnceThroughTheClusterWhileTheStoreHangs) {
  std::string tree = LoadedClusterMountWithShortTtl();
  ASSERT_FALSE(tree.empty());
  ExpectExpiredTreeReadsAtOnce(tree, Outage::kStopped);
}

// 7b. The same in a standalone mount, whose own metadata cache holds the loaded tree.
TEST_F(LoadTest, ExpiredLoadedTreeReadsAtOnceInAStandaloneMountWhileTheStoreRefuses) {
  std::string tree = LoadedStandaloneMountWithShortTtl();
  ASSERT_FALSE(tree.empty());
  ExpectExpiredTreeReadsAtOnce(tree, Outage::kRefusing);
}

TEST_F(LoadTest, ExpiredLoadedTreeReadsAtOnceInAStandaloneMountWhileTheStoreHangs) {
  std::string tree = LoadedStandaloneMountWithShortTtl();
  ASSERT_FALSE(tree.empty());
  ExpectExpiredTreeReadsAtOnce(tree, Outage::kStopped);
}

// 2. `report` after a load: the namespace's cached bytes, per worker and in the totals, are the
//    bytes the load cached.
TEST_F(LoadTest, ReportCountsTheLoadedBytes) {
  StartCluster();
  ASSERT_FALSE(HasFatalFailure());
  RunResult load = Lc(ClusterLoad());
  ASSERT_EQ(load.exit_code, 0) << Describe(load);
  json summary = ParseJson(load, "load");
  ExpectFullClusterLoad(summary);
  // A fresh cluster had nothing cached.
  EXPECT_EQ(Num(summary, "/bytes/loaded"), I(TreeBytes())) << summary.dump();
  EXPECT_EQ(Num(summary, "/bytes/already_cached"), 0) << summary.dump();
  int64_t loaded = Num(summary, "/bytes/loaded") + Num(summary, "/bytes/already_cached");

  RunResult r = Lc({"report", "--json", "--master", master_address_}, std::chrono::seconds(30));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  json report = ParseJson(r, "report");
  EXPECT_EQ(Str(report, "/target"), "cluster") << report.dump();
  EXPECT_EQ(Str(report, "/address"), master_address_) << report.dump();
  json workers = Array(report, "/workers");
  EXPECT_EQ(workers.size(), workers_.size()) << report.dump();
  int64_t per_worker_bytes = 0, per_worker_blocks = 0, reported_fetches = 0;
  for (const json& w : workers) {
    EXPECT_TRUE(w.value("reachable", false)) << w.dump();
    reported_fetches += Num(w, "/fetches");
    for (const json& ns : Array(w, "/namespaces")) {
      if (ns.value("ns", "") != kNs) continue;
      per_worker_bytes += Num(ns, "/cached_bytes");
      per_worker_blocks += Num(ns, "/blocks");
    }
  }
  EXPECT_EQ(per_worker_bytes, loaded) << report.dump();
  EXPECT_EQ(per_worker_blocks, I(TreeBlocks())) << report.dump();
  EXPECT_EQ(reported_fetches, I(TotalFetches())) << report.dump();
  EXPECT_EQ(Num(report, "/totals/workers"), I(workers_.size())) << report.dump();
  int64_t total_bytes = -1, total_blocks = -1;
  for (const json& ns : Array(report, "/totals/namespaces")) {
    if (ns.value("ns", "") != kNs) continue;
    total_bytes = Num(ns, "/cached_bytes");
    total_blocks = Num(ns, "/blocks");
  }
  EXPECT_EQ(total_bytes, loaded) << report.dump();
  EXPECT_EQ(total_blocks, I(TreeBlocks())) << report.dump();

  // The same from the workers themselves, over gRPC.
  uint64_t from_stats = 0;
  for (const testing::WorkerProcess& w : workers_) {
    rpc::WorkerStats stats = Stats(w);
    for (const rpc::NamespaceUsage& ns : stats.namespaces()) {
      if (ns.ns() == kNs) from_stats += ns.cached_bytes();
    }
  }
  EXPECT_EQ(I(from_stats), loaded);
}

// 3. `free` evicts the tree: the next read through a fresh mount goes to the store again.
TEST_F(LoadTest, FreeMakesTheNextReadFetchAgain) {
  StartCluster();
  ASSERT_FALSE(HasFatalFailure());
  RunResult load = Lc(ClusterLoad());
  ASSERT_EQ(load.exit_code, 0) << Describe(load);

  RunResult r = Lc({"free", kTreePath, "-R", "--json", "--master", master_address_});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  json freed = ParseJson(r, "free");
  EXPECT_EQ(Str(freed, "/path"), kTreePath) << freed.dump();
  EXPECT_EQ(Num(freed, "/blocks_freed"), I(TreeBlocks())) << freed.dump();
  // Whether an empty file (no block) counts as freed is not said: either.
  int64_t files = Num(freed, "/files");
  EXPECT_TRUE(files == I(TreeFiles().size()) || files == I(TreeFiles().size() - EmptyTreeFiles()))
      << freed.dump();

  r = Lc({"report", "--json", "--master", master_address_}, std::chrono::seconds(30));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  json report = ParseJson(r, "report");
  for (const json& ns : Array(report, "/totals/namespaces")) {
    if (ns.value("ns", "") == kNs) {
      EXPECT_EQ(Num(ns, "/cached_bytes"), 0) << report.dump();
    }
  }

  ProxyCounts before = proxy_->counts();
  uint64_t fetches = TotalFetches();
  Mount();
  ASSERT_FALSE(HasFatalFailure());
  std::vector<std::string> errors =
      CheckTreeAt(mountpoint_ + "/" + kNs + "/" + kTreeKey, /*stop_early=*/false);
  EXPECT_TRUE(errors.empty()) << Join(errors);
  ProxyCounts after = proxy_->counts() - before;
  EXPECT_GT(after.object_gets, 0u) << ToString(after);
  EXPECT_GT(after.lists + after.heads, 0u)
      << "free unpins the listings: the next read lists again; " << ToString(after);
  EXPECT_EQ(TotalFetches() - fetches, TreeBlocks()) << "every block fetched again, once";
}

// 4. A load interrupted by SIGINT exits 130; run again, it fetches only what is missing and
//    leaves every file fully cached.
TEST_F(LoadTest, InterruptedLoadRunAgainFetchesOnlyWhatIsMissing) {
  StartCluster();
  ASSERT_FALSE(HasFatalFailure());
  std::unique_ptr<BackgroundCommand> load;
  ASSERT_NO_FATAL_FAILURE(StartSlowClusterLoad(&load));
  ASSERT_TRUE(load->Signal(SIGINT));
  RunResult first = load->Wait(std::chrono::seconds(30));
  proxy_->SetBandwidth(0);
  ASSERT_EQ(first.exit_code, 130) << Describe(first);
  // The summary of an interrupted load says so.
  json interrupted = json::parse(first.out, nullptr, /*allow_exceptions=*/false);
  int64_t loaded_before = 0;
  if (interrupted.is_object()) {
    EXPECT_EQ(interrupted.value("complete", true), false) << interrupted.dump();
    loaded_before = Num(interrupted, "/bytes/loaded");
    EXPECT_LT(loaded_before, I(TreeBytes())) << interrupted.dump();
  } else {
    ADD_FAILURE() << "an interrupted load printed no JSON summary (complete: false); "
                  << Describe(first);
  }

  RunResult second = Lc(ClusterLoad());
  ASSERT_EQ(second.exit_code, 0) << Describe(second);
  json summary = ParseJson(second, "load run again");
  ExpectFullClusterLoad(summary);
  EXPECT_GT(Num(summary, "/bytes/already_cached"), 0) << summary.dump();
  EXPECT_LT(Num(summary, "/bytes/loaded"), I(TreeBytes())) << summary.dump();
  // What the first run verified as loaded was still cached.
  EXPECT_GE(Num(summary, "/bytes/already_cached"), loaded_before) << summary.dump();
  // Over both runs each block came from the store once: the second fetched only what was missing
  // (however much of the first run's work went on after the interrupt).
  EXPECT_EQ(TotalFetches(), TreeBlocks());
  std::cout << "interrupted load: " << loaded_before << " of " << TreeBytes()
            << " bytes loaded; run again: loaded " << Num(summary, "/bytes/loaded")
            << ", already cached " << Num(summary, "/bytes/already_cached") << "\n";
  ExpectTreeFullyCached(kTreePath, {"--master", master_address_});
}

// 5. A path that does not exist, or a namespace the cluster does not have: usage errors (2) that
//    name what is missing, and nothing is loaded.
TEST_F(LoadTest, MissingPathAndUnknownNamespaceExitTwo) {
  StartCluster();
  ASSERT_FALSE(HasFatalFailure());
  RunResult r = Lc(ClusterLoad("/ds/no/such/path"));
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  // "no/such/path": the message may name it as /ds/no/such/path or within namespace ds.
  EXPECT_NE(r.err.find("no/such/path"), std::string::npos) << Describe(r);

  r = Lc(ClusterLoad("/nosuchns/data"));
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_NE(r.err.find("nosuchns"), std::string::npos) << Describe(r);
  EXPECT_EQ(TotalFetches(), 0u);
}

// 6. A worker SIGKILLed mid-load: the load either completes on the others or fails exactly the
//    files cached nowhere; `stat` agrees file by file.
TEST_F(LoadTest, WorkerKilledMidLoadFailsExactlyWhatIsCachedNowhere) {
  StartCluster();
  ASSERT_FALSE(HasFatalFailure());
  std::unique_ptr<BackgroundCommand> load;
  ASSERT_NO_FATAL_FAILURE(StartSlowClusterLoad(&load));
  testing::WorkerProcess& victim = workers_[1];
  ASSERT_EQ(::kill(victim.process->pid(), SIGKILL), 0);
  RunResult r = load->Wait(kLoadTimeout);
  proxy_->SetBandwidth(0);
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << Describe(r);
  json summary = ParseJson(r, "load");
  EXPECT_EQ(summary.value("complete", false), true) << summary.dump();
  EXPECT_EQ(Num(summary, "/files/total"), I(TreeFiles().size())) << summary.dump();
  std::set<std::string> failed;
  for (const json& f : Array(summary, "/failures")) {
    failed.insert(f.value("path", ""));
    EXPECT_FALSE(f.value("error", "").empty()) << f.dump();
  }
  EXPECT_EQ(Num(summary, "/files/failed"), I(failed.size())) << summary.dump();
  // Exit 0 only when nothing failed. Exit 1 may also mean "a worker could not be reached" (the
  // spec's exit codes), so it does not by itself require a failed file.
  if (r.exit_code == 0) {
    EXPECT_TRUE(failed.empty()) << summary.dump();
  }
  std::cout << "worker killed mid-load: exit " << r.exit_code << ", " << failed.size()
            << " files failed\n";

  // `stat` counts blocks on live workers: wait until the master has dropped the dead one.
  WaitForView(workers_.size() - 1, std::chrono::seconds(20));
  for (const auto& [rel, content] : TreeFiles()) {
    std::string path = std::string(kTreePath) + "/" + rel;
    json s = Stat(path, {"--master", master_address_});
    int64_t total = Num(s, "/blocks_total");
    EXPECT_EQ(total, I(BlocksOf(content.size()))) << path << ": " << s.dump();
    bool fully_cached = total >= 0 && Num(s, "/blocks_cached") == total;
    EXPECT_EQ(fully_cached, !failed.contains(path))
        << path << (failed.contains(path) ? " is among the failures" : " was not reported failed")
        << " but stat says " << s.dump();
  }
}

// 7. A path inside a standalone mount: the load goes into that mount's own cache, and reading the
//    tree through it then asks the store for nothing.
TEST_F(LoadTest, LoadIntoAStandaloneMount) {
  std::string mnt = StartStandaloneMount();
  ASSERT_FALSE(mnt.empty());
  std::string tree = mnt + "/" + kNs + "/" + kTreeKey;
  // No --master, no LAKECACHE_MASTER (CliEnv): the mount is the target.
  RunResult load = Lc({"load", tree, "-R", "--json"});
  ASSERT_EQ(load.exit_code, 0) << Describe(load) << "\nmount log:\n" << standalone_->LogTail();
  json summary = ParseJson(load, "load");
  EXPECT_EQ(Str(summary, "/target"), "mount") << summary.dump();
  EXPECT_EQ(Str(summary, "/address"), mnt) << summary.dump();
  ExpectFullLoadCounts(summary);

  ProxyCounts before = proxy_->counts();
  std::vector<std::string> errors = CheckTreeAt(tree, /*stop_early=*/false);
  EXPECT_TRUE(errors.empty()) << Join(errors);
  ProxyCounts during = proxy_->counts() - before;
  EXPECT_EQ(during.object_gets, 0u) << ToString(during) << "\n"
                                    << proxy_->RequestsSince(before.log_entries());
  EXPECT_EQ(during.requests, 0u) << ToString(during) << "\n"
                                 << proxy_->RequestsSince(before.log_entries());

  ExpectTreeFullyCached(tree, {});
  // A standalone mount reports itself as one worker.
  RunResult r = Lc({"report", mnt, "--json"}, std::chrono::seconds(30));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  json report = ParseJson(r, "report");
  EXPECT_EQ(Str(report, "/target"), "mount") << report.dump();
  EXPECT_EQ(Array(report, "/workers").size(), 1u) << report.dump();
  int64_t cached = -1;
  for (const json& ns : Array(report, "/totals/namespaces")) {
    if (ns.value("ns", "") == kNs) cached = Num(ns, "/cached_bytes");
  }
  EXPECT_EQ(cached, I(TreeBytes())) << report.dump();
}

// 8. A /ns/path with neither --master nor LAKECACHE_MASTER, outside any mount: exit 2, saying a
//    master is needed. An object-store URI is refused by load, report and free before any master
//    is asked.
TEST_F(LoadTest, WithoutAMasterOrWithAStoreUriIsAUsageError) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"load", "/ds/x"},
                                             {"load", "/ds/x", "-R", "--json"},
                                             {"free", "/ds/x", "-R"},
                                             {"stat", "/ds/x"},
                                             {"report", "/ds/x"}}) {
    RunResult r = Lc(args, std::chrono::seconds(30));
    EXPECT_EQ(r.exit_code, 2) << testing::JoinArgv(args) << ": " << Describe(r);
    EXPECT_NE(Lower(r.err).find("master"), std::string::npos)
        << testing::JoinArgv(args) << " does not say a master is needed: " << Describe(r);
  }
  // Nothing listens at port 1: were the URI not refused first, this would be "cannot reach" (1).
  for (const char* command : {"load", "report", "free"}) {
    RunResult r =
        Lc({command, "s3://ds/data", "--master", "127.0.0.1:1"}, std::chrono::seconds(30));
    EXPECT_EQ(r.exit_code, 2) << command << " s3://ds/data: " << Describe(r);
  }
}

// Without --json and with stderr not a terminal, progress is plain lines (no carriage-return bar),
// about one every 2 seconds; the summary goes to stdout.
TEST_F(LoadTest, PlainProgressLinesWhenStderrIsNotATerminal) {
  StartCluster();
  ASSERT_FALSE(HasFatalFailure());
  proxy_->SetBandwidth(kSlowBandwidth);
  auto start = Clock::now();
  RunResult r = Lc({"load", kTreePath, "-R", "--master", master_address_});
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  proxy_->SetBandwidth(0);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << "a redrawn bar on a pipe: " << Describe(r);
  EXPECT_EQ(r.err.find("\x1b["), std::string::npos)
      << "terminal escapes on a pipe: " << Describe(r);
  EXPECT_FALSE(r.out.empty()) << "no summary on stdout";
  size_t lines = 0;
  size_t from = 0;
  for (size_t nl = r.err.find('\n'); nl != std::string::npos; nl = r.err.find('\n', from)) {
    if (nl > from) ++lines;
    from = nl + 1;
  }
  std::cout << "plain load: " << seconds << " s, " << lines << " lines on stderr:\n"
            << r.err << "stdout:\n"
            << r.out;
  if (seconds >= 4) {
    EXPECT_GE(lines, 1u) << "a " << seconds << " s load printed no progress";
  }
  // One line every 2 s (and perhaps one at the start and one at the end), not one per block.
  EXPECT_LE(lines, static_cast<size_t>(seconds / 2) + 3) << "more than one line every 2 s:\n"
                                                         << r.err;
}

}  // namespace
}  // namespace lakecache::load_test
