// Prometheus metrics and the master's status page, on real processes: a standalone mount, and a
// master, two workers and a cluster mount, each with --metrics-listen, over s3rver. Every scrape
// is parsed by the Prometheus Python client's text-format parser (tests/support/prom_scrape.py)
// and the counters are checked exactly against the bytes read: a cold read moves the object-store
// bytes by the bytes read, a warm one (page cache dropped) moves them by 0 and the tiers' hit
// bytes by at least the bytes read. The status page is opened in headless Chromium; every metric
// the Grafana dashboard queries must appear in a scrape.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/cluster_procs.h"
#include "support/test_data.h"
#include "support/wait_for.h"

// Its own namespace: the files of integration_tests are compiled in unity batches.
namespace lakecache::metrics_test {
namespace {

using json = nlohmann::json;
using testing::RunCommand;
using testing::RunResult;

constexpr char kBucket[] = "metrics";
constexpr int kSmallFiles = 12;
constexpr size_t kSmallSize = 200 * 1024 + 17;
constexpr int kBigFiles = 2;
constexpr size_t kBigSize = 3 * 1024 * 1024 + 5;  // four 1 MiB blocks, the last one short

std::string SmallKey(int i) { return "small/f" + std::to_string(i) + ".bin"; }
std::string BigKey(int i) { return "big/g" + std::to_string(i) + ".bin"; }
std::string Content(const std::string& key, size_t size) {
  std::string s(size, '\0');
  uint32_t x = static_cast<uint32_t>(std::hash<std::string>()(key)) | 1;
  for (size_t i = 0; i < size; ++i) {
    x = x * 1664525u + 1013904223u;
    s[i] = static_cast<char>(x >> 24);
  }
  return s;
}

int FreePort() { return testing::FreeLoopbackPort(); }

// One scrape, as the Prometheus client's parser read it.
struct Scrape {
  std::vector<std::tuple<std::string, std::map<std::string, std::string>, double>> samples;
  std::set<std::string> families;  // as the parser names them (a counter without "_total")

  // The sum of the samples named `name` whose labels include `labels`.
  double Sum(const std::string& name, const std::map<std::string, std::string>& labels = {}) const {
    double total = 0;
    for (const auto& [n, l, v] : samples) {
      if (n != name) continue;
      bool match = true;
      for (const auto& [k, want] : labels) {
        auto it = l.find(k);
        if (it == l.end() || it->second != want) match = false;
      }
      if (match) total += v;
    }
    return total;
  }
  bool Has(const std::string& name) const {
    for (const auto& [n, l, v] : samples) {
      if (n == name) return true;
    }
    return families.contains(name);
  }
};

Scrape ScrapeUrl(const std::string& url) {
  RunResult r =
      RunCommand({"/usr/bin/python3",
                  std::string(LAKECACHE_SOURCE_DIR) + "/tests/support/prom_scrape.py", url},
                 {}, std::chrono::seconds(30));
  Scrape scrape;
  EXPECT_EQ(r.exit_code, 0) << url << ": " << r.err;
  if (r.exit_code != 0) return scrape;
  json parsed = json::parse(r.out);
  for (const json& s : parsed["samples"]) {
    scrape.samples.emplace_back(s[0].get<std::string>(),
                                s[1].get<std::map<std::string, std::string>>(), s[2].get<double>());
  }
  for (const auto& [name, type] : parsed["families"].items()) scrape.families.insert(name);
  return scrape;
}

size_t Count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// Bytes readers got from every tier.
double HitBytes(const Scrape& s) { return s.Sum("lakecache_cache_hit_bytes_total"); }
double StoreBytes(const Scrape& s) { return s.Sum("lakecache_object_store_read_bytes_total"); }
double FuseBytes(const Scrape& s) { return s.Sum("lakecache_fuse_read_bytes_total"); }

class MetricsTest : public testing::ClusterProcessFixture {
 protected:
  static void SetUpTestSuite() {
    auto started = testing::S3rver::Start({.buckets = {kBucket}});
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started).value().release();
    std::vector<std::pair<std::string, std::string>> objects;
    for (int i = 0; i < kSmallFiles; ++i)
      objects.push_back({SmallKey(i), Content(SmallKey(i), kSmallSize)});
    for (int i = 0; i < kBigFiles; ++i)
      objects.push_back({BigKey(i), Content(BigKey(i), kBigSize)});
    Status put = server_->PutObjects(kBucket, objects);
    ASSERT_TRUE(put.ok()) << put.ToString();
  }

  void SetUp() override {
    SetUpScratch("lakecache-metrics");
    if (HasFatalFailure()) return;
    WriteConfig({{kBucket, server_->endpoint(), "1MiB"}});
  }

  static std::string Url(int port, const std::string& path = "/metrics") {
    return "http://127.0.0.1:" + std::to_string(port) + path;
  }

  // Waits until the endpoint answers.
  static void WaitForEndpoint(int port) {
    auto deadline = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < deadline) {
      RunResult r =
          RunCommand({"curl", "-sf", "-o", "/dev/null", Url(port)}, {}, std::chrono::seconds(5));
      if (r.exit_code == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "nothing serves " << Url(port);
  }

  // Reads every file of the dataset through the mount, checking each byte; returns the bytes.
  // The files are opened O_DIRECT: the kernel then asks the mount for exactly the ranges read.
  // Through the page cache it may ask for a page twice (a readahead page dropped before it was
  // read), and the counters, which count what the mount served, would be a page off now and then.
  uint64_t ReadAll(const std::vector<std::string>& keys) {
    uint64_t total = 0;
    constexpr size_t kChunk = 1 << 20;
    std::unique_ptr<char, decltype(&std::free)> buf(
        static_cast<char*>(std::aligned_alloc(4096, kChunk)), &std::free);
    for (const std::string& key : keys) {
      std::string path = mountpoint_ + "/" + kBucket + "/" + key;
      int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
      EXPECT_GE(fd, 0) << path << ": " << std::strerror(errno);
      std::string got;
      for (ssize_t n; fd >= 0 && (n = ::read(fd, buf.get(), kChunk)) > 0;) got.append(buf.get(), n);
      if (fd >= 0) ::close(fd);
      size_t size = key.starts_with("small/") ? kSmallSize : kBigSize;
      EXPECT_EQ(got.size(), size) << path;
      EXPECT_TRUE(got == Content(key, size)) << path << ": wrong bytes";
      total += got.size();
    }
    return total;
  }

  // Drops the kernel's page cache of the dataset's files, so the next read reaches the mount.
  void DropPageCache(const std::vector<std::string>& keys) {
    for (const std::string& key : keys) {
      std::string path = mountpoint_ + "/" + kBucket + "/" + key;
      int fd = ::open(path.c_str(), O_RDONLY);
      ASSERT_GE(fd, 0) << path;
      EXPECT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0) << path;
      ::close(fd);
    }
  }

  static std::vector<std::string> Keys(bool small, bool big) {
    std::vector<std::string> keys;
    for (int i = 0; small && i < kSmallFiles; ++i) keys.push_back(SmallKey(i));
    for (int i = 0; big && i < kBigFiles; ++i) keys.push_back(BigKey(i));
    return keys;
  }

  // Every metric a panel of deploy/grafana/lakecache.json queries, by base name.
  static std::set<std::string> DashboardMetrics() {
    std::ifstream in(std::string(LAKECACHE_SOURCE_DIR) + "/deploy/grafana/lakecache.json");
    json dashboard = json::parse(in);
    std::set<std::string> names;
    std::regex metric("lakecache_[a-z0-9_]+");
    std::function<void(const json&)> walk = [&](const json& node) {
      if (node.is_object()) {
        for (const auto& [key, value] : node.items()) {
          if ((key == "expr" || key == "query") && value.is_string()) {
            std::string expr = value.get<std::string>();
            for (std::sregex_iterator it(expr.begin(), expr.end(), metric), end; it != end; ++it) {
              names.insert(it->str());
            }
          } else {
            walk(value);
          }
        }
      } else if (node.is_array()) {
        for (const json& item : node) walk(item);
      }
    };
    walk(dashboard);
    return names;
  }

  // `name` without a histogram's or counter's suffix.
  static std::string BaseName(std::string name) {
    for (const char* suffix : {"_bucket", "_count", "_sum", "_total"}) {
      if (name.ends_with(suffix)) return name.substr(0, name.size() - std::strlen(suffix));
    }
    return name;
  }
};

TEST_F(MetricsTest, StandaloneMountCountsWhatItReads) {
  int port = FreePort();
  std::vector<std::string> argv = {
      LAKECACHE_BINARY, "--config",         config_,
      "mount",          mountpoint_,        "--mem-cache",
      "256MiB",         "--metrics-listen", "127.0.0.1:" + std::to_string(port)};
  auto started = testing::ChildProcess::Start(argv, dir_->path() + "/mount.log");
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  mount_ = std::move(started).value();
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!testing::IsMounted(mountpoint_)) {
    ASSERT_TRUE(mount_->Running() && Clock::now() < deadline)
        << "not mounted: " << mount_->LogTail();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  WaitForEndpoint(port);

  std::vector<std::string> keys = Keys(true, true);
  Scrape before = ScrapeUrl(Url(port));
  uint64_t bytes = ReadAll(keys);
  Scrape cold = ScrapeUrl(Url(port));
  // Cold: every byte read came from the object store, once.
  EXPECT_EQ(StoreBytes(cold) - StoreBytes(before), static_cast<double>(bytes));
  EXPECT_EQ(cold.Sum("lakecache_cache_fetched_bytes_total") -
                before.Sum("lakecache_cache_fetched_bytes_total"),
            static_cast<double>(bytes));
  EXPECT_EQ(FuseBytes(cold) - FuseBytes(before), static_cast<double>(bytes));
  EXPECT_GT(cold.Sum("lakecache_fuse_operation_duration_seconds_count", {{"op", "read"}}), 0);
  EXPECT_GT(cold.Sum("lakecache_object_store_request_duration_seconds_count", {{"op", "read"}}), 0);
  EXPECT_GE(cold.Sum("lakecache_object_store_requests_total", {{"op", "read"}, {"code", "ok"}}),
            static_cast<double>(keys.size()));
  EXPECT_EQ(cold.Sum("lakecache_build_info"), 1);

  // Warm, with the page cache dropped: nothing from the store, everything from the tiers.
  DropPageCache(keys);
  Scrape warm_before = ScrapeUrl(Url(port));
  EXPECT_EQ(ReadAll(keys), bytes);
  Scrape warm = ScrapeUrl(Url(port));
  EXPECT_EQ(StoreBytes(warm) - StoreBytes(warm_before), 0);
  // The cache is memory only here: every byte read was a memory hit, counted once.
  EXPECT_EQ(HitBytes(warm) - HitBytes(warm_before), static_cast<double>(bytes));
  EXPECT_EQ(warm.Sum("lakecache_cache_hit_bytes_total", {{"tier", "memory"}}) -
                warm_before.Sum("lakecache_cache_hit_bytes_total", {{"tier", "memory"}}),
            static_cast<double>(bytes));
  EXPECT_EQ(FuseBytes(warm) - FuseBytes(warm_before), static_cast<double>(bytes));
  EXPECT_GT(warm.Sum("lakecache_cache_used_bytes", {{"tier", "memory"}}), 0);
  EXPECT_EQ(warm.Sum("lakecache_cache_capacity_bytes", {{"tier", "memory"}}), 256.0 * 1024 * 1024);

  // A refused write is an error of its operation (EPERM: overwriting is not allowed).
  int fd = ::open((mountpoint_ + "/" + kBucket + "/" + SmallKey(0)).c_str(), O_WRONLY | O_TRUNC);
  EXPECT_LT(fd, 0);
  if (fd >= 0) ::close(fd);
  Scrape refused = ScrapeUrl(Url(port));
  EXPECT_GE(refused.Sum("lakecache_fuse_errors_total"), 1);
}

TEST_F(MetricsTest, ClusterDaemonsCountReadsAndLoadsAndTheStatusPageShowsThem) {
  // The status page samples every 300 ms here (2 s by default), so its plot fills quickly.
  int master_port = FreePort();
  master_args_ = {"--metrics-listen", "127.0.0.1:" + std::to_string(master_port),
                  "--status-interval", "300ms"};
  std::vector<int> worker_ports = {FreePort(), FreePort()};
  StartMaster();
  ASSERT_FALSE(master_address_.empty());
  for (size_t i = 0; i < worker_ports.size(); ++i) {
    testing::WorkerProcess w;
    w.name = "worker-" + std::to_string(i + 1);
    w.cache_dir = dir_->path() + "/" + w.name;
    w.mem_cache = "64MiB";
    w.cache_size = "256MiB";
    w.extra_args = {"--metrics-listen", "127.0.0.1:" + std::to_string(worker_ports[i])};
    workers_.push_back(std::move(w));
    StartWorker(workers_.back());
  }
  WaitForView(workers_.size(), std::chrono::seconds(20));
  int mount_port = FreePort();
  Mount({"--metrics-listen", "127.0.0.1:" + std::to_string(mount_port)});
  for (int port : worker_ports) WaitForEndpoint(port);
  WaitForEndpoint(master_port);
  WaitForEndpoint(mount_port);

  auto workers_sum = [&](const std::function<double(const Scrape&)>& f) {
    double total = 0;
    for (int port : worker_ports) total += f(ScrapeUrl(Url(port)));
    return total;
  };

  // A load of big/: the workers fetch exactly its bytes; the master counts the job and its bytes.
  double store_before = workers_sum(StoreBytes);
  RunResult load = RunCommand({LAKECACHE_BINARY, "load", std::string("/") + kBucket + "/big", "-R",
                               "--master", master_address_},
                              {}, std::chrono::seconds(120));
  ASSERT_EQ(load.exit_code, 0) << load.err;
  double big_bytes = static_cast<double>(kBigFiles * kBigSize);
  EXPECT_EQ(workers_sum(StoreBytes) - store_before, big_bytes);
  Scrape master = ScrapeUrl(Url(master_port));
  EXPECT_EQ(master.Sum("lakecache_load_jobs_total"), 1);
  EXPECT_EQ(master.Sum("lakecache_load_jobs_running"), 0);
  EXPECT_EQ(master.Sum("lakecache_load_bytes_total"), big_bytes);
  EXPECT_EQ(master.Sum("lakecache_master_workers", {{"state", "live"}}), 2);
  EXPECT_EQ(master.Sum("lakecache_master_namespaces"), 1);
  EXPECT_GT(master.Sum("lakecache_master_rpc_duration_seconds_count", {{"method", "Register"}}), 0);

  // Cold read through the mount: only what was not loaded comes from the store.
  std::vector<std::string> keys = Keys(true, true);
  store_before = workers_sum(StoreBytes);
  Scrape mount_before = ScrapeUrl(Url(mount_port));
  uint64_t bytes = ReadAll(keys);
  EXPECT_EQ(workers_sum(StoreBytes) - store_before, static_cast<double>(kSmallFiles * kSmallSize));
  Scrape mount_cold = ScrapeUrl(Url(mount_port));
  EXPECT_EQ(FuseBytes(mount_cold) - FuseBytes(mount_before), static_cast<double>(bytes));
  EXPECT_GT(workers_sum([](const Scrape& s) {
              return s.Sum("lakecache_worker_rpc_duration_seconds_count");
            }),
            0);
  // The cold blocks came over the bulk data path, each request timed.
  EXPECT_GT(workers_sum([](const Scrape& s) {
              return s.Sum("lakecache_worker_rpc_duration_seconds_count", {{"method", "BulkRead"}});
            }),
            0);

  // Warm: no store bytes; the tiers (the workers' and the mount's view of them) serve it all.
  DropPageCache(keys);
  store_before = workers_sum(StoreBytes);
  double hits_before = workers_sum(HitBytes) + HitBytes(ScrapeUrl(Url(mount_port)));
  Scrape mount_warm_before = ScrapeUrl(Url(mount_port));
  EXPECT_EQ(ReadAll(keys), bytes);
  EXPECT_EQ(workers_sum(StoreBytes) - store_before, 0);
  Scrape mount_warm = ScrapeUrl(Url(mount_port));
  EXPECT_GE(workers_sum(HitBytes) + HitBytes(mount_warm) - hits_before, static_cast<double>(bytes));
  EXPECT_EQ(FuseBytes(mount_warm) - FuseBytes(mount_warm_before), static_cast<double>(bytes));

  // The master hears from the mount what its readers read: the status page counts the reads
  // served from this host's worker memory too, which no worker sees.
  // It reports them with its next view fetches (every 500 ms).
  RunResult status;
  json board;
  auto fetch_board = [&] {  // the master's status.json into `board`; false if none came
    status =
        RunCommand({"curl", "-sf", Url(master_port, "/status.json")}, {}, std::chrono::seconds(20));
    board = json::parse(status.out, nullptr, /*allow_exceptions=*/false);
    return status.exit_code == 0 && board.is_object();
  };
  testing::WaitFor([&] {
    return fetch_board() && board["mounts"].size() == 1 &&
           board["mounts"][0]["read_bytes"].get<double>() >= 2.0 * static_cast<double>(bytes);
  });
  ASSERT_EQ(status.exit_code, 0) << status.err;
  ASSERT_EQ(board["mounts"].size(), 1u) << status.out.substr(0, 2000);
  EXPECT_GE(board["mounts"][0]["read_bytes"].get<double>(), 2.0 * static_cast<double>(bytes));
  EXPECT_EQ(board["mounts"][0]["mountpoint"].get<std::string>(), mountpoint_);
  EXPECT_LE(board["mounts"][0]["local_bytes"].get<double>(),
            board["mounts"][0]["read_bytes"].get<double>());
  double best_hit_ratio = -1;
  for (const json& point : board["history"]["points"]) {
    if (point["served_bytes_per_second"].get<double>() > 0 && point["hit_ratio"].is_number()) {
      best_hit_ratio = std::max(best_hit_ratio, point["hit_ratio"].get<double>());
    }
  }
  EXPECT_EQ(best_hit_ratio, 1.0) << "no interval of the warm read shows a hit ratio of 1";
  // Every worker's blocks were loaded or read cold, then read warm (on this host from its memory
  // or files, or over the network): no worker's column may say that none of it was a hit.
  for (const json& w : board["workers"]) {
    EXPECT_NE(w["hit_ratio"], json(0.0)) << w.dump();
  }

  // The numbers a worker's Stats (what `report` and `cluster status` print) and its /metrics give
  // are the same numbers.
  for (size_t i = 0; i < workers_.size(); ++i) {
    rpc::WorkerStats stats = Stats(workers_[i]);
    Scrape s = ScrapeUrl(Url(worker_ports[i]));
    EXPECT_EQ(s.Sum("lakecache_worker_served_bytes_total"),
              static_cast<double>(stats.bytes_served()));
    EXPECT_EQ(s.Sum("lakecache_cache_fetched_bytes_total"),
              static_cast<double>(stats.fetched_bytes()));
    ASSERT_GT(stats.tiers_size(), 0);
    EXPECT_EQ(s.Sum("lakecache_cache_hits_total", {{"tier", "memory"}}),
              static_cast<double>(stats.tiers(0).hits()));
    EXPECT_EQ(s.Sum("lakecache_cache_used_bytes", {{"tier", "memory"}}),
              static_cast<double>(stats.tiers(0).used_bytes()));
  }

  // The status page during a read: every worker listed, the throughput plot with points.
  std::atomic<bool> reading{true};
  std::thread reader([&] {
    for (int round = 0; round < 200 && reading; ++round) {
      DropPageCache(keys);
      ReadAll(keys);
    }
  });
  // The page is drawn once the board plots two points of these reads and no worker's hit ratio
  // is 0.
  EXPECT_TRUE(testing::WaitFor([&] {
    if (!fetch_board()) return false;
    size_t reading_points = 0;
    for (const json& point : board["history"]["points"]) {
      reading_points += point["served_bytes_per_second"].get<double>() > 0 ? 1 : 0;
    }
    for (const json& w : board["workers"]) {
      if (w["hit_ratio"] == json(0.0)) return false;
    }
    return reading_points >= 2;
  })) << status.out.substr(0, 2000);
  RunResult page = RunCommand({"chromium", "--headless", "--no-sandbox", "--disable-gpu",
                               "--virtual-time-budget=5000", "--dump-dom", Url(master_port, "/")},
                              {}, std::chrono::seconds(60));
  // LAKECACHE_STATUS_SCREENSHOT=FILE.png: a picture of the page as it is now
  // (docs/observability.md).
  if (const char* png = std::getenv("LAKECACHE_STATUS_SCREENSHOT"); png != nullptr) {
    RunResult shot =
        RunCommand({"chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1280,1100", "--virtual-time-budget=5000",
                    std::string("--screenshot=") + png, Url(master_port, "/")},
                   {}, std::chrono::seconds(60));
    EXPECT_EQ(shot.exit_code, 0) << shot.err;
  }
  reading = false;
  reader.join();
  ASSERT_EQ(page.exit_code, 0) << page.err;
  rpc::ClusterView view = View();
  ASSERT_EQ(view.workers_size(), 2);
  for (const rpc::WorkerInfo& w : view.workers()) {
    EXPECT_NE(page.out.find("data-id=\"" + w.id() + "\""), std::string::npos)
        << "worker " << w.id() << " is not on the page";
  }
  EXPECT_EQ(Count(page.out, "class=\"mount\""), 1u) << "the mount is not on the page";
  EXPECT_EQ(page.out.find(">0.0 %<"), std::string::npos) << "a worker's hit ratio shows 0 %";
  size_t throughput = page.out.find("id=\"plot-throughput\"");
  ASSERT_NE(throughput, std::string::npos) << page.out.substr(0, 2000);
  std::string plot = page.out.substr(throughput, page.out.find("</svg>", throughput) - throughput);
  EXPECT_GE(Count(plot, "class=\"point\""), 2u) << plot.substr(0, 2000);

  // Every metric the Grafana dashboard queries appears in a scrape of some daemon.
  std::set<std::string> scraped;
  std::vector<Scrape> all = {ScrapeUrl(Url(master_port)), ScrapeUrl(Url(mount_port))};
  for (int port : worker_ports) all.push_back(ScrapeUrl(Url(port)));
  for (const Scrape& s : all) {
    for (const auto& [name, labels, value] : s.samples) scraped.insert(BaseName(name));
    for (const std::string& family : s.families) scraped.insert(BaseName(family));
  }
  std::set<std::string> queried = DashboardMetrics();
  EXPECT_GE(queried.size(), 15u);
  for (const std::string& name : queried) {
    EXPECT_TRUE(scraped.contains(BaseName(name))) << name << " is queried by the dashboard but "
                                                  << "no daemon exports it";
  }
}

}  // namespace
}  // namespace lakecache::metrics_test
