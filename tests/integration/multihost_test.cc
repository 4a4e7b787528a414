// Cluster mode across hosts, emulated with network namespaces (support/netns_lab.h): s3rver in
// `store`, the master in `master`, workers in `w1`..`w3` and a cluster-mode mount in `client`,
// which reach each other over a bridge by their namespace IPs only. Every byte reads back, the
// blocks spread over the workers, a fresh mount reads them from the workers rather than the
// store, and a SIGKILLed worker costs no byte.
//
// Network safety (shared test-infra.md): the lab blackholes its subnet in the root namespace, and
// nothing here talks to a namespace IP from the root namespace: curl and `cluster status` run in
// `client`, the mount's process lives in `client` (nsenter, so the mount shows on the host), and
// the test only reads the FUSE mount, which is local I/O. Needs root, iproute2, nsenter and
// /dev/fuse; without them the test fails saying so.
//
// Separate hosts do not share files either, but namespaces share one kernel (and its boot id):
// each worker's cache directory is bound to storage of its own inside the worker's private mount
// namespace (`ip netns exec` makes one), so the host and the client see an empty folder there
// and blocks cross the bridge as they would between machines.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/fuse_mounts.h"
#include "support/netns_lab.h"
#include "support/test_data.h"
#include "support/test_servers.h"
#include "support/wait_for.h"

// Its own namespace: the files of integration_tests are compiled in unity batches.
namespace lakecache::multihost_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::ChildProcess;
using testing::IsMounted;
using testing::MakeBytes;
using testing::RunCommand;
using testing::RunResult;
using testing::TempDir;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr uint64_t kKiB = 1 << 10;
constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kBlockSize = kMiB;
constexpr int kShards = 8;  // 8 x 8 MiB: 64 blocks
constexpr uint64_t kShardSize = 8 * kMiB;
constexpr int kSmallFiles = 200;  // under one block each: 200 blocks
constexpr char kBucket[] = "ds";
constexpr char kStorePort[] = "9000";
constexpr char kMasterPort[] = "7400";
constexpr char kWorkerPort[] = "7500";
const std::vector<std::string> kWorkers = {"w1", "w2", "w3"};
const std::vector<std::string> kMasters = {"master", "m2", "m3"};  // with etcd
constexpr auto kElectionTtl = seconds(4);
constexpr auto kPoll = milliseconds(50);
constexpr auto kStartTimeout = seconds(20);

// Nothing in a namespace may detour through a proxy, and a cluster client needs no credentials.
const std::vector<std::string> kEnv = {
    "-http_proxy",        "-https_proxy",       "-HTTP_PROXY",
    "-HTTPS_PROXY",       "-all_proxy",         "-ALL_PROXY",
    "-grpc_proxy",        "-AWS_ACCESS_KEY_ID", "-AWS_SECRET_ACCESS_KEY",
    "-AWS_SESSION_TOKEN", "-AWS_ENDPOINT_URL",  "-LAKECACHE_MASTER"};

struct Object {
  std::string key;
  std::string content;
};

// 8 shards of 8 MiB and a folder of 200 small files (1 to 61 KiB, odd sizes): 264 blocks.
std::vector<Object> MakeDataset() {
  std::vector<Object> objects;
  for (int i = 0; i < kShards; ++i) {
    objects.push_back({"shards/shard-" + std::to_string(i) + ".bin", MakeBytes(i, kShardSize)});
  }
  for (int i = 0; i < kSmallFiles; ++i) {
    uint64_t size = kKiB + (static_cast<uint64_t>(i) * 7919) % (60 * kKiB);
    objects.push_back({"small/file-" + std::to_string(i) + ".dat", MakeBytes(1000 + i, size)});
  }
  return objects;
}

uint64_t BlockCount(const std::vector<Object>& objects) {
  uint64_t blocks = 0;
  for (const Object& o : objects) blocks += (o.content.size() + kBlockSize - 1) / kBlockSize;
  return blocks;
}

// "" when `path` holds exactly `want`, else what differs.
std::string CheckFile(const std::string& path, const std::string& want) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return path + ": open: " + std::strerror(errno);
  std::string got(want.size() + 1, '\0');  // one byte more, to see a file that is too long
  size_t have = 0;
  std::string error;
  while (have < got.size()) {
    ssize_t n = ::read(fd, got.data() + have, std::min<size_t>(kMiB, got.size() - have));
    if (n < 0) error = path + ": read at " + std::to_string(have) + ": " + std::strerror(errno);
    if (n <= 0) break;
    have += static_cast<size_t>(n);
  }
  ::close(fd);
  if (!error.empty()) return error;
  if (have != want.size()) {
    return path + ": " + std::to_string(have) + " bytes, want " + std::to_string(want.size());
  }
  if (std::memcmp(got.data(), want.data(), have) != 0) return path + ": content differs";
  return "";
}

int64_t Ms(Clock::duration d) { return std::chrono::duration_cast<milliseconds>(d).count(); }

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The workers of a `cluster status --json` answer; none when it failed.
json Workers(const json& status) {
  return status.is_object() ? status.value("workers", json::array()) : json::array();
}

// Blocks in a worker's disk tiers: where every block ends up (the memory tier is smaller).
uint64_t DiskBlocks(const json& worker) {
  uint64_t blocks = 0;
  for (const json& tier : worker.value("tiers", json::array())) {
    if (tier.value("tier", "").starts_with("disk")) blocks += tier.value("blocks", uint64_t{0});
  }
  return blocks;
}

// `field` summed over the workers that answered.
uint64_t Sum(const json& status, const char* field) {
  uint64_t total = 0;
  for (const json& w : Workers(status)) {
    json value = w.value(field, json());
    if (value.is_number_unsigned()) total += value.get<uint64_t>();
  }
  return total;
}

// 0 for "default", 24 for "10.200.7.0/24", 32 for a plain address.
int PrefixLength(const std::string& dst) {
  if (dst == "default") return 0;
  size_t slash = dst.find('/');
  return slash == std::string::npos ? 32 : std::stoi(dst.substr(slash + 1));
}

// Rule 1 of the lab, seen from the root namespace: `ip route get` fails with EINVAL (the kernel's
// answer for a blackhole route) instead of naming the gateway, and the longest matching route is
// the lab's blackhole. Looks the route up only: nothing is sent.
void ExpectBlackholed(const std::string& ip, const std::string& subnet) {
  RunResult get = RunCommand({"ip", "route", "get", ip});
  EXPECT_NE(get.exit_code, 0) << "the root namespace routes " << ip << ": " << get.out;
  EXPECT_NE(get.err.find("Invalid argument"), std::string::npos) << get.err;
  RunResult match = RunCommand({"ip", "-j", "route", "show", "match", ip});
  json routes = json::parse(match.out, nullptr, /*allow_exceptions=*/false);
  json best = json::object();  // the longest prefix: the route the kernel picks
  int best_length = -1;
  for (const json& r : routes.is_array() ? routes : json::array()) {
    int length = PrefixLength(r.value("dst", ""));
    if (length > best_length) best = r, best_length = length;
  }
  EXPECT_EQ(best.value("type", "unicast"), "blackhole") << match.out;
  EXPECT_EQ(best.value("dst", ""), subnet) << match.out;
}

// No namespace named `prefix`... and no route for `subnet` left in the root namespace.
void ExpectNothingLeft(const std::string& prefix, const std::string& subnet) {
  RunResult netns = RunCommand({"ip", "netns", "list"});
  EXPECT_EQ(netns.exit_code, 0) << netns.err;
  for (const std::string& line : Lines(netns.out)) {
    EXPECT_FALSE(line.starts_with(prefix)) << "left behind: " << line;
  }
  RunResult route = RunCommand({"ip", "route", "show", "exact", subnet});
  EXPECT_EQ(route.out, "") << "route left behind";
}

class MultihostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status made = lab_.Create({"store", "master", "m2", "m3", "w1", "w2", "w3", "client"});
    ASSERT_TRUE(made.ok()) << made.ToString();
    ASSERT_TRUE(fs::exists("/dev/fuse")) << "needs /dev/fuse for the cluster-mode mount";
    dir_ = std::make_unique<TempDir>("lakecache-multihost");
    mountpoint_ = dir_->path() + "/mnt";
    fs::create_directory(mountpoint_);
    endpoint_ = "http://" + lab_.Ip("store") + ":" + kStorePort;
    master_address_ = lab_.Ip("master") + ":" + kMasterPort;
    // The cluster runs with TLS and role tokens across the namespaces, as across hosts.
    credentials_ = dir_->path() + "/credentials";
    RunResult cert =
        RunCommand({LAKECACHE_BINARY, "cert", "--dir", credentials_}, kEnv, seconds(30));
    ASSERT_EQ(cert.exit_code, 0) << cert.out << cert.err;
  }

  void TearDown() override {
    StopEverything();
    for (const std::string& data : etcd_data_) {
      std::error_code ec;
      fs::remove_all(data, ec);
    }
    Status destroyed = lab_.Destroy();
    EXPECT_TRUE(destroyed.ok()) << destroyed.ToString();
    dir_.reset();
  }

  // Unmounts first: a FUSE daemon killed under its mount would leave a dead mount behind.
  void StopEverything() {
    Unmount();
    for (auto& [name, worker] : workers_) worker.reset();
    master_.reset();
    for (auto& [name, process] : masters_) process.reset();
    for (auto& [name, member] : etcd_) member.reset();
    store_.reset();
  }

  std::string Log(const std::string& name) const { return dir_->path() + "/" + name + ".log"; }

  Result<std::unique_ptr<ChildProcess>> StartIn(const std::string& node,
                                                const std::vector<std::string>& argv,
                                                const std::string& name) {
    return ChildProcess::Start(lab_.In(node, argv), dir_->path() + "/" + name + ".out", kEnv);
  }

  RunResult RunIn(const std::string& node, const std::vector<std::string>& argv,
                  seconds timeout = seconds(30)) {
    return RunCommand(lab_.In(node, argv), kEnv, timeout);
  }

  std::vector<std::string> SignedCurl() const {
    return {"curl",        "-sS",
            "--noproxy",   "*",
            "--user",      "S3RVER:S3RVER",
            "--aws-sigv4", "aws:amz:us-east-1:s3",
            "-H",          "x-amz-content-sha256: UNSIGNED-PAYLOAD"};
  }

  // s3rver in `store`, asked from `client` until it answers a signed ListBuckets.
  void StartStore() {
    std::vector<std::string> argv = {"node",
                                     "--openssl-legacy-provider",
                                     LAKECACHE_SOURCE_DIR "/node_modules/s3rver/bin/s3rver.js",
                                     "-d",
                                     dir_->path() + "/s3data",
                                     "-a",
                                     lab_.Ip("store"),
                                     "-p",
                                     kStorePort,
                                     "--configure-bucket",
                                     kBucket};
    auto started = StartIn("store", argv, "s3rver");
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    store_ = std::move(started).value();
    std::vector<std::string> probe = SignedCurl();
    probe.insert(probe.end(),
                 {"-o", "/dev/null", "-w", "%{http_code}", "--max-time", "2", endpoint_ + "/"});
    auto deadline = Clock::now() + kStartTimeout;
    RunResult r;
    while (true) {
      ASSERT_TRUE(store_->Running()) << "s3rver exited: " << store_->LogTail();
      r = RunIn("client", probe, seconds(5));
      if (r.exit_code == 0 && r.out == "200") return;
      ASSERT_TRUE(Clock::now() < deadline) << "s3rver at " << endpoint_ << " not serving: HTTP "
                                           << r.out << " " << r.err << store_->LogTail();
      std::this_thread::sleep_for(kPoll);
    }
  }

  // One parallel curl run in `client`, its uploads signed as in test_servers.cc.
  void Upload(const std::vector<Object>& objects) {
    std::string staging = dir_->path() + "/staging";
    fs::create_directory(staging);
    std::string config;
    for (size_t i = 0; i < objects.size(); ++i) {
      std::string file = staging + "/" + std::to_string(i);
      ASSERT_TRUE(testing::WriteFile(file, objects[i].content).ok());
      config += (i == 0 ? "" : "next\n");
      config += "url = \"" + endpoint_ + "/" + kBucket + "/" + objects[i].key + "\"\n" +
                "upload-file = \"" + file + "\"\n" + "write-out = \"%{http_code} " +
                std::to_string(i) + "\\n\"\noutput = \"" + file +
                ".answer\"\n"  // a retry truncates it: not /dev/null
                "aws-sigv4 = \"aws:amz:us-east-1:s3\"\nuser = \"S3RVER:S3RVER\"\n"
                "header = \"x-amz-content-sha256: UNSIGNED-PAYLOAD\"\n"
                "noproxy = \"*\"\nretry = 2\n";
    }
    ASSERT_TRUE(testing::WriteFile(staging + "/curl.config", config).ok());
    RunResult r = RunIn("client", {"curl", "--no-progress-meter", "--parallel", "--parallel-max",
                                   "16", "-K", staging + "/curl.config"});
    size_t ok = 0;
    for (const std::string& line : Lines(r.out)) ok += line.starts_with("200 ") ? 1 : 0;
    ASSERT_EQ(ok, objects.size()) << "curl exit " << r.exit_code << ": " << r.err.substr(0, 2000);
    fs::remove_all(staging);
  }

  void WriteConfig() {
    config_ = dir_->path() + "/lake.yaml";
    ASSERT_TRUE(testing::WriteFile(config_, std::string("namespaces:\n  ") + kBucket +
                                                ":\n    uri: s3://" + kBucket +
                                                "/\n    endpoint: " + endpoint_ +
                                                "\n    path_style: true\n"
                                                "    access_key: S3RVER\n"
                                                "    secret_key: S3RVER\n"
                                                "    block_size: 1MiB\n"
                                                "cluster: {heartbeat_interval: 500ms, "
                                                "heartbeat_timeout: 2s}\n")
                    .ok());
  }

  std::vector<std::string> Lakecache(const std::string& name) const {
    return {LAKECACHE_BINARY, "--config", config_, "--log-level", "info", "--log-file", Log(name)};
  }

  // One master in `master`, or with `etcd` one in each of kMasters, with an etcd member beside
  // it (etcd stacked on the control-plane hosts, as kubeadm does); then the workers.
  void StartCluster(bool etcd = false) {
    ASSERT_NO_FATAL_FAILURE(WriteConfig());
    if (etcd) {
      ASSERT_NO_FATAL_FAILURE(StartEtcdAndMasters());
    } else {
      std::vector<std::string> argv = Lakecache("master");
      argv.insert(argv.end(),
                  {"master", "--listen", master_address_, "--credentials", credentials_});
      auto started = StartIn("master", argv, "master");
      ASSERT_TRUE(started.ok()) << started.status().ToString();
      master_ = std::move(started).value();
    }
    for (const std::string& w : kWorkers) {
      std::string disk = dir_->path() + "/" + w + "/disk";  // its files, seen only by it
      std::string cache_dir = dir_->path() + "/" + w + "/cache";
      fs::create_directories(disk);
      fs::create_directories(cache_dir);
      std::vector<std::string> argv = {
          "sh", "-c", "mount --bind \"$1\" \"$2\" && shift 2 && exec \"$@\"",
          "sh", disk, cache_dir};
      std::vector<std::string> worker = Lakecache(w);
      worker.insert(worker.end(), {"worker", "--listen", lab_.Ip(w) + ":" + kWorkerPort, "--master",
                                   master_address_, "--cache-dir", cache_dir, "--cache-size",
                                   "1GiB", "--mem-cache", "64MiB", "--credentials", credentials_});
      argv.insert(argv.end(), worker.begin(), worker.end());
      auto started = StartIn(w, argv, w);
      ASSERT_TRUE(started.ok()) << started.status().ToString();
      workers_[w] = std::move(started).value();
    }
    // Until the master lists all three and each answers Stats (the workers register once the
    // master is up; they retry every heartbeat interval until then).
    auto deadline = Clock::now() + kStartTimeout;
    while (true) {
      if (master_) {
        ASSERT_TRUE(master_->Running()) << "master exited: " << ReadLog("master");
      }
      for (auto& [name, master] : masters_) {
        ASSERT_TRUE(master->Running()) << name << " exited: " << ReadLog("master-" + name);
      }
      for (auto& [name, worker] : workers_) {
        ASSERT_TRUE(worker->Running()) << name << " exited: " << ReadLog(name);
      }
      json status = ClusterStatus(/*expect_ok=*/false);
      size_t reachable = 0;
      for (const json& w : Workers(status)) reachable += w.value("reachable", false) ? 1 : 0;
      if (reachable == kWorkers.size()) return;
      ASSERT_TRUE(Clock::now() < deadline)
          << "the master never listed 3 reachable workers: " << status.dump() << "\n"
          << ReadLog("master");
      std::this_thread::sleep_for(kPoll * 2);
    }
  }

  // etcd members in the kMasters namespaces (data on tmpfs, timeouts raised for two busy cores),
  // and a `lakecache master --etcd` beside each; master_address_ becomes the masters' list.
  void StartEtcdAndMasters() {
    std::string cluster, endpoints, masters;
    for (const std::string& m : kMasters) {
      cluster += (cluster.empty() ? "" : ",") + m + "=http://" + lab_.Ip(m) + ":2380";
      endpoints += (endpoints.empty() ? "" : ",") + lab_.Ip(m) + ":2379";
      masters += (masters.empty() ? "" : ",") + lab_.Ip(m) + ":" + kMasterPort;
    }
    for (const std::string& m : kMasters) {
      std::string data = "/dev/shm/" + lab_.Namespace(m) + "-etcd";
      etcd_data_.push_back(data);
      std::string client = "http://" + lab_.Ip(m) + ":2379",
                  peer = "http://" + lab_.Ip(m) + ":2380";
      auto started = StartIn(m,
                             {"etcd",
                              "--name",
                              m,
                              "--data-dir",
                              data,
                              "--listen-client-urls",
                              client,
                              "--advertise-client-urls",
                              client,
                              "--listen-peer-urls",
                              peer,
                              "--initial-advertise-peer-urls",
                              peer,
                              "--initial-cluster",
                              cluster,
                              "--initial-cluster-state",
                              "new",
                              "--initial-cluster-token",
                              lab_.name_prefix(),
                              "--heartbeat-interval",
                              "200",
                              "--election-timeout",
                              "2000",
                              "--log-level",
                              "warn"},
                             "etcd-" + m);
      ASSERT_TRUE(started.ok()) << started.status().ToString();
      etcd_[m] = std::move(started).value();
    }
    for (const std::string& m : kMasters) {
      std::vector<std::string> argv = Lakecache("master-" + m);
      argv.insert(argv.end(), {"master", "--listen", lab_.Ip(m) + ":" + kMasterPort,
                               "--credentials", credentials_, "--etcd", endpoints, "--election-ttl",
                               std::to_string(kElectionTtl.count())});
      auto started = StartIn(m, argv, "master-" + m);
      ASSERT_TRUE(started.ok()) << started.status().ToString();
      masters_[m] = std::move(started).value();
    }
    master_address_ = masters;
  }

  std::string ReadLog(const std::string& name) const {
    return testing::ReadFileTail(Log(name), 3000);
  }

  // `lakecache cluster status --json`, run in `client`; null when it failed.
  json ClusterStatus(bool expect_ok = true) {
    RunResult r = RunIn("client", {LAKECACHE_BINARY, "cluster", "status", "--json", "--master",
                                   master_address_, "--credentials", credentials_});
    json status = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    bool ok = r.exit_code == 0 && status.is_object();
    if (expect_ok) {
      EXPECT_TRUE(ok) << "cluster status exit " << r.exit_code << ": " << r.out << r.err;
    }
    return ok ? status : json();
  }

  // A status in which every worker but `dead` (an address) answered: a worker's counters are
  // missing from a status whose call to it timed out (3 s), which a loaded 2-core machine sees.
  json AnsweredStatus(const std::string& dead = "") {
    auto deadline = Clock::now() + kStartTimeout;
    json status;
    while (Clock::now() < deadline) {
      status = ClusterStatus();
      bool answered = status.is_object();
      for (const json& w : Workers(status)) {
        if (w.value("address", "") != dead && w.contains("error")) answered = false;
      }
      if (answered) break;
      std::this_thread::sleep_for(kPoll * 2);
    }
    return status;
  }

  // Until the workers' disk tiers (written behind) hold `blocks` together; the last status.
  json WaitForDiskBlocks(uint64_t blocks) {
    auto deadline = Clock::now() + kStartTimeout;
    json status;
    while (Clock::now() < deadline) {
      status = ClusterStatus();
      uint64_t on_disk = 0;
      for (const json& w : Workers(status)) on_disk += DiskBlocks(w);
      if (on_disk >= blocks) break;
      std::this_thread::sleep_for(kPoll * 2);
    }
    return status;
  }

  // `lakecache mount --master` with only its network namespace changed, so the mount shows here.
  void Mount() {
    std::vector<std::string> argv = lab_.Nsenter(
        "client", {LAKECACHE_BINARY, "--log-level", "info", "--log-file", Log("mount"), "mount",
                   "--master", master_address_, "--credentials", credentials_, mountpoint_,
                   // Another host: its kernel is this one, its disk and memory are
                   // not the workers'.
                   "-o", "client.short_circuit=false"});
    auto started = ChildProcess::Start(argv, dir_->path() + "/mount.out", kEnv);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    mount_ = std::move(started).value();
    auto deadline = Clock::now() + kStartTimeout;
    while (!IsMounted(mountpoint_)) {
      ASSERT_TRUE(mount_->Running() && Clock::now() < deadline)
          << "not mounted: " << mount_->LogTail() << ReadLog("mount");
      std::this_thread::sleep_for(milliseconds(20));
    }
  }

  void Unmount() {
    if (dir_ == nullptr) return;
    Status unmounted = testing::UnmountForTest(mountpoint_);
    EXPECT_TRUE(unmounted.ok()) << unmounted.ToString();
    if (!mount_) return;
    auto deadline = Clock::now() + kStartTimeout;
    while (mount_->Running() && Clock::now() < deadline) std::this_thread::sleep_for(kPoll);
    mount_.reset();
  }

  // Reads every object through the mount with four threads; the errors. Counts the files read
  // right in *read, if given, as they are.
  std::vector<std::string> ReadAll(const std::vector<Object>& objects,
                                   std::atomic<size_t>* read = nullptr) {
    std::vector<std::string> errors;
    std::mutex mu;
    std::atomic<size_t> next{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < 4; ++r) {
      readers.emplace_back([&] {
        for (size_t i = next++; i < objects.size(); i = next++) {
          std::string path = mountpoint_ + "/" + kBucket + "/" + objects[i].key;
          std::string error = CheckFile(path, objects[i].content);
          if (error.empty() && read != nullptr) ++*read;
          if (error.empty()) continue;
          std::lock_guard lock(mu);
          errors.push_back(error);
        }
      });
    }
    for (std::thread& t : readers) t.join();
    return errors;
  }

  void ExpectEveryByte(const std::vector<Object>& objects) {
    std::vector<std::string> errors = ReadAll(objects);
    EXPECT_TRUE(errors.empty()) << errors.size() << " files wrong; first: " << errors.front();
  }

  // Three workers at their namespace IPs, each holding 15% to 55% of the blocks on disk.
  void ExpectSpreadOverWorkers(const json& status, uint64_t blocks) {
    ASSERT_EQ(Workers(status).size(), kWorkers.size()) << status.dump(2);
    std::map<std::string, std::string> name_of;  // address -> worker
    for (const std::string& w : kWorkers) name_of[lab_.Ip(w) + ":" + kWorkerPort] = w;
    for (const json& w : Workers(status)) {
      std::string address = w.value("address", "");
      ASSERT_EQ(name_of.count(address), 1u) << address << " is not a worker's namespace IP";
      double share = static_cast<double>(DiskBlocks(w)) / static_cast<double>(blocks);
      EXPECT_TRUE(share >= 0.15 && share <= 0.55)
          << name_of[address] << " holds " << DiskBlocks(w) << " of " << blocks << " blocks";
      std::cout << name_of[address] << " " << address << ": " << DiskBlocks(w) << " blocks, "
                << w.value("fetches", json()) << " fetches\n";
    }
  }

  void KillWorker(const std::string& name) {
    ChildProcess& worker = *workers_.at(name);
    ASSERT_EQ(::kill(worker.pid(), SIGKILL), 0);
    auto deadline = Clock::now() + seconds(5);
    while (worker.Running() && Clock::now() < deadline) std::this_thread::sleep_for(kPoll);
    ASSERT_FALSE(worker.Running()) << name << " survived SIGKILL";
  }

  testing::NetnsLab lab_;
  std::unique_ptr<TempDir> dir_;
  std::string mountpoint_;
  std::string endpoint_;
  std::string master_address_;
  std::string credentials_;  // the cluster's folder (lakecache cert): TLS across the namespaces
  std::string config_;
  std::unique_ptr<ChildProcess> store_;
  std::vector<std::string> etcd_data_;  // the members' data folders on tmpfs
  std::unique_ptr<ChildProcess> master_;
  std::map<std::string, std::unique_ptr<ChildProcess>> workers_;
  std::unique_ptr<ChildProcess> mount_;
  // The HA test's: masters and etcd members by node.
  std::map<std::string, std::unique_ptr<ChildProcess>> masters_;
  std::map<std::string, std::unique_ptr<ChildProcess>> etcd_;
};

TEST_F(MultihostTest, ClusterAcrossHostsReadsExactlyFromWorkersAndSurvivesAWorkerKill) {
  auto start = Clock::now();
  auto phase = start;
  auto report = [&](const char* what) {
    std::cout << what << ": " << Ms(Clock::now() - phase) << " ms\n";
    phase = Clock::now();
  };
  const std::vector<Object> objects = MakeDataset();
  const uint64_t blocks = BlockCount(objects);
  ASSERT_EQ(blocks, 264u);
  ASSERT_NO_FATAL_FAILURE(StartStore());
  ASSERT_NO_FATAL_FAILURE(Upload(objects));
  report("s3rver in its namespace and 65 MiB uploaded from `client`");
  ASSERT_NO_FATAL_FAILURE(StartCluster());
  report("master and 3 workers up");

  // Epoch 1: every byte right, each block fetched once from the store, spread over the workers.
  ASSERT_NO_FATAL_FAILURE(Mount());
  RunResult ls = RunCommand({"ls", mountpoint_});
  EXPECT_EQ(ls.out, std::string(kBucket) + "\n") << ls.err;
  ASSERT_NO_FATAL_FAILURE(ExpectEveryByte(objects));
  report("first read through the mount");
  json status = WaitForDiskBlocks(blocks);
  ASSERT_NO_FATAL_FAILURE(ExpectSpreadOverWorkers(status, blocks));
  EXPECT_EQ(Sum(status, "fetches"), blocks);
  for (const std::string& w : kWorkers) {
    std::string cache_dir = dir_->path() + "/" + w + "/cache";
    EXPECT_TRUE(fs::is_empty(cache_dir)) << cache_dir << " is not private to " << w;
  }
  report("workers' disk tiers hold every block");

  // Epoch 2, fresh mount (no client or page cache): all from the workers, nothing from the store.
  Unmount();
  uint64_t served = Sum(status, "blocks_served");
  ASSERT_NO_FATAL_FAILURE(Mount());
  ASSERT_NO_FATAL_FAILURE(ExpectEveryByte(objects));
  status = AnsweredStatus();
  EXPECT_EQ(Sum(status, "fetches"), blocks) << "the second read went to the object store";
  EXPECT_GE(Sum(status, "blocks_served") - served, blocks);
  for (const json& w : Workers(status)) {  // a mount of another host maps no worker's memory
    json shm = w.value("shared_memory", json::object());
    EXPECT_EQ(shm.value("sessions", -1), 0) << w.dump();
    EXPECT_EQ(shm.value("deferred_bytes", -1), 0) << w.dump();
  }
  report("second read, from the workers");

  // Epoch 3: w2 SIGKILLed; its blocks come from the next worker in rendezvous order, which
  // fetches each once.
  ASSERT_NO_FATAL_FAILURE(KillWorker("w2"));
  Unmount();
  ASSERT_NO_FATAL_FAILURE(Mount());
  ASSERT_NO_FATAL_FAILURE(ExpectEveryByte(objects));
  status = AnsweredStatus(lab_.Ip("w2") + ":" + kWorkerPort);
  for (const json& w : Workers(status)) {
    bool is_w2 = w.value("address", "") == lab_.Ip("w2") + ":" + kWorkerPort;
    EXPECT_FALSE(is_w2 && w.value("reachable", true)) << "w2 answers after SIGKILL: " << w.dump();
  }
  EXPECT_EQ(Sum(status, "fetches"), blocks) << "w1 and w3 should have fetched w2's blocks once";
  std::cout << "after killing w2: " << Workers(status).size() << " worker(s) listed, "
            << Sum(status, "fetches") << " fetches by the live ones\n";
  report("third read with w2 killed");

  ExpectBlackholed(lab_.Ip("w1"), lab_.subnet());
  StopEverything();
  Status destroyed = lab_.Destroy();
  EXPECT_TRUE(destroyed.ok()) << destroyed.ToString();
  ExpectNothingLeft(lab_.name_prefix(), lab_.subnet());
  report("teardown");
  std::cout << "total: " << Ms(Clock::now() - start) << " ms\n";
}

// The masters on three hosts with etcd beside them, over TLS: the leading master SIGKILLed while
// the mount reads from the workers costs no byte; another master leads within two leases, the
// mount lists a folder it never listed, and `lakecache load` runs on the new leader. (Its etcd
// member stays: a lost etcd raft leader makes etcd elect another and renew every lease, the dead
// master's included, which on two busy cores took up to 30 s; etcd_ha_test kills etcd members.)
TEST_F(MultihostTest, MastersOnThreeHostsWithEtcdSurviveTheLeaderKilled) {
  std::vector<Object> objects = MakeDataset();
  std::vector<Object> late;  // listed only after the loss
  for (int i = 0; i < 10; ++i) {
    late.push_back({"late/file-" + std::to_string(i) + ".dat", MakeBytes(5000 + i, 3 * kKiB)});
  }
  std::vector<Object> all = objects;
  all.insert(all.end(), late.begin(), late.end());
  ASSERT_NO_FATAL_FAILURE(StartStore());
  ASSERT_NO_FATAL_FAILURE(Upload(all));
  ASSERT_NO_FATAL_FAILURE(StartCluster(/*etcd=*/true));
  json status = ClusterStatus();
  ASSERT_TRUE(status.value("etcd", false)) << status.dump(2);
  std::string leader = status.value("leader", "");
  std::string lost;  // the leader's host
  for (const std::string& m : kMasters) {
    if (leader == lab_.Ip(m) + ":" + kMasterPort) lost = m;
  }
  ASSERT_FALSE(lost.empty()) << "the leader " << leader << " is none of the masters";

  // Epoch 1 fills the workers; epoch 2, from a fresh mount, reads from them while the host goes.
  ASSERT_NO_FATAL_FAILURE(Mount());
  ASSERT_NO_FATAL_FAILURE(ExpectEveryByte(objects));
  WaitForDiskBlocks(BlockCount(objects));
  Unmount();
  ASSERT_NO_FATAL_FAILURE(Mount());
  // Rounds of reading every byte until the cluster has moved on (a master leads and lists).
  std::vector<std::string> errors;
  std::atomic<bool> moved_on{false};
  std::atomic<size_t> files_read{0};
  int rounds = 0;
  std::thread readers([&] {
    for (auto until = Clock::now() + seconds(60); !moved_on && Clock::now() < until; ++rounds) {
      std::vector<std::string> e = ReadAll(objects, &files_read);
      errors.insert(errors.end(), e.begin(), e.end());
      for (const Object& o : objects) {  // the next round reads through the mount again
        int fd = ::open((mountpoint_ + "/" + kBucket + "/" + o.key).c_str(), O_RDONLY | O_CLOEXEC);
        if (fd >= 0) ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        if (fd >= 0) ::close(fd);
      }
    }
  });
  // The leader goes while the readers are reading (not before they start).
  EXPECT_TRUE(testing::WaitFor([&] { return files_read > 0; }));
  ASSERT_EQ(::kill(masters_[lost]->pid(), SIGKILL), 0);
  auto lost_at = Clock::now();
  const size_t read_at_loss = files_read;

  // A folder this mount never listed lists once a master leads again.
  size_t listed = 0;
  Clock::duration listed_after{};
  while (Clock::now() - lost_at < seconds(30) && listed != late.size()) {
    std::error_code ec;
    listed = 0;
    for (fs::directory_iterator it(mountpoint_ + "/" + kBucket + "/late", ec), end;
         !ec && it != end; it.increment(ec)) {
      ++listed;
    }
    listed_after = Clock::now() - lost_at;
    if (listed != late.size()) std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(listed, late.size());
  const auto bound = 2 * kElectionTtl;
  EXPECT_LE(listed_after, bound) << Ms(listed_after) << " ms";

  std::string now_leading;
  Clock::duration led_after{};
  while (Clock::now() - lost_at < seconds(30)) {
    json next = ClusterStatus(/*expect_ok=*/false);
    now_leading = next.is_object() ? next.value("leader", "") : "";
    led_after = Clock::now() - lost_at;
    if (!now_leading.empty() && now_leading != leader) break;
    std::this_thread::sleep_for(milliseconds(200));
  }
  const size_t read_after_loss = files_read - read_at_loss;
  moved_on = true;
  readers.join();
  EXPECT_TRUE(errors.empty()) << errors.size() << " files wrong; first: " << errors.front();
  EXPECT_GT(read_after_loss, 0u) << "no file was read while the cluster moved on";
  EXPECT_NE(now_leading, leader);
  EXPECT_FALSE(now_leading.empty()) << [&] {
    RunResult r = RunIn("client", {LAKECACHE_BINARY, "cluster", "status", "--master",
                                   master_address_, "--credentials", credentials_});
    std::string logs = "cluster status: " + r.out + r.err;
    for (const std::string& m : kMasters) logs += "\n" + m + ": " + ReadLog("master-" + m);
    return logs + "\nmount: " + ReadLog("mount");
  }();
  EXPECT_LE(led_after, bound + seconds(1)) << Ms(led_after) << " ms";
  std::cout << "leader " << leader << " killed: " << now_leading
            << " leads (seen by `cluster status` after " << Ms(led_after)
            << " ms); a never-listed folder listed after " << Ms(listed_after) << " ms; " << rounds
            << " rounds of reading every byte meanwhile\n";
  RunResult load =
      RunIn("client", {LAKECACHE_BINARY, "load", std::string("/") + kBucket + "/late", "-R",
                       "--master", master_address_, "--credentials", credentials_});
  EXPECT_EQ(load.exit_code, 0) << load.out << load.err;
  ExpectEveryByte(late);
}

}  // namespace
}  // namespace lakecache::multihost_test
