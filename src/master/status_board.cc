#include "master/status_board.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

#include "master/client_table.h"
#include "master/worker_registry.h"
#include "meta/namespace_table.h"

namespace lakecache {

extern const char kStatusPageHtml[];  // status_page.html, embedded by the build

namespace {

using json = nlohmann::json;

constexpr char kPlaceholder[] = "/*LAKECACHE_STATUS*/null";

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The bytes a worker's tiers gave the readers it served over the network. Its lookups would not
// do: a load looks up every block it fills (a miss), and reads a mount makes on the worker's host
// never reach it. A load checks for a block before it fetches it, so it adds nothing here.
uint64_t HitBytes(const rpc::WorkerStats& w) {
  uint64_t hit = 0;
  for (const rpc::TierStatsProto& t : w.tiers()) hit += t.hit_bytes();
  return hit;
}

// Mounts on the worker's host that map its memory now, or have opened its cache files: they read
// its blocks themselves, hits the worker does not count.
bool HasShortCircuitReaders(const rpc::WorkerStats& w) {
  return w.shm_sessions() > 0 || w.blocks_located() > 0;
}

double Ratio(uint64_t part, uint64_t whole) {
  return static_cast<double>(part) / static_cast<double>(whole);
}

// The worker's share of the bytes it served that its tiers held. With short-circuit readers that
// is only a lower bound of its hit ratio: exact at 1, and telling nothing at 0.
void AddHitRatio(const rpc::WorkerStats& w, json* worker) {
  const uint64_t served = w.bytes_served();
  const uint64_t hit = std::min(HitBytes(w), served);
  const bool short_circuit = HasShortCircuitReaders(w);
  (*worker)["hit_bytes"] = hit;
  (*worker)["short_circuit_readers"] = short_circuit;
  (*worker)["shm_sessions"] = w.shm_sessions();
  (*worker)["blocks_located"] = w.blocks_located();
  (*worker)["hit_ratio"] = nullptr;
  (*worker)["hit_ratio_at_least"] = nullptr;
  if (served == 0) return;
  if (!short_circuit || hit == served) {
    (*worker)["hit_ratio"] = Ratio(hit, served);
  } else if (hit > 0) {
    (*worker)["hit_ratio_at_least"] = Ratio(hit, served);
  }
}

uint64_t Delta(uint64_t now, uint64_t before) { return now >= before ? now - before : 0; }

// A worker of the view: its stats from the last poll, or `stats` null when it did not answer (its
// error is the entry of `unreachable` that names it).
json WorkerJson(const rpc::WorkerInfo& info, const rpc::WorkerStats* stats,
                const google::protobuf::RepeatedPtrField<std::string>& unreachable) {
  json worker = {{"id", info.id()},
                 {"address", info.address()},
                 {"capacity_bytes", info.capacity_bytes()},
                 {"used_bytes", info.used_bytes()}};
  if (stats == nullptr) {
    worker["state"] = "unreachable";
    worker["hit_ratio"] = nullptr;
    for (const std::string& u : unreachable) {
      if (u.starts_with(info.id() + " ")) worker["error"] = u.substr(info.id().size() + 1);
    }
    return worker;
  }
  worker["state"] = "live";
  worker["bytes_served"] = stats->bytes_served();
  AddHitRatio(*stats, &worker);
  json tiers = json::array();
  for (const rpc::TierStatsProto& t : stats->tiers()) {
    tiers.push_back({{"tier", t.tier()},
                     {"used_bytes", t.used_bytes()},
                     {"capacity_bytes", t.capacity_bytes()}});
  }
  worker["tiers"] = std::move(tiers);
  return worker;
}

json LoadsJson(const std::vector<LoadJobTable::Job>& jobs) {
  json loads = json::array();
  for (const LoadJobTable::Job& job : jobs) {
    const LoadProgress& p = job.progress;
    loads.push_back({{"ns", job.ns},
                     {"path", job.path},
                     {"started_ms", job.started_ms},
                     {"seconds", p.seconds},
                     {"listed", p.listed},
                     {"files_total", p.total.files},
                     {"files_done", p.files_done},
                     {"bytes_total", p.total.bytes},
                     {"bytes_done", p.loaded.bytes + p.already_cached.bytes + p.failed.bytes},
                     {"failed_blocks", p.failed.files}});
  }
  return loads;
}

}  // namespace

StatusBoard::StatusBoard(AdminBackend* admin, const NamespaceTable* namespaces,
                         WorkerRegistry* registry, const ClientTable* clients,
                         const LoadJobTable* loads, StatusBoardOptions options)
    : admin_(admin),
      namespaces_(namespaces),
      registry_(registry),
      clients_(clients),
      loads_(loads),
      options_(std::move(options)),
      started_(options_.clock->Now()) {
  sampler_ = std::thread([this] { Loop(); });
}

StatusBoard::~StatusBoard() {
  {
    MutexLock lock(&stop_mu_);
    stopping_ = true;
  }
  stop_cv_.SignalAll();
  sampler_.join();
}

void StatusBoard::Loop() {
  const SteadyClock& clock = *options_.clock;
  while (true) {
    const SteadyClock::time_point next = clock.Now() + options_.interval;
    Sample();
    MutexLock lock(&stop_mu_);
    while (!stopping_ && clock.Now() < next) clock.WaitUntil(&stop_cv_, &stop_mu_, next);
    if (stopping_) return;
  }
}

void StatusBoard::Sample() {
  MutexLock sampling(&sample_mu_);
  Result<rpc::Report> report = admin_->GetReport();
  if (!report.ok()) return;
  auto now = options_.clock->Now();
  MutexLock lock(&mu_);
  double seconds = std::chrono::duration<double>(now - last_at_).count();
  bool first = points_.empty() && counters_.empty();
  uint64_t served = 0, missed = 0, fetched = 0;
  std::map<std::string, Counters> counters;
  for (const rpc::WorkerStats& w : report->workers()) {
    Counters c;
    c.start_time_ms = w.worker().start_time_ms();
    c.served = w.bytes_served();
    c.hit = HitBytes(w);
    c.fetched = w.fetched_bytes();
    auto it = counters_.find(w.worker().id());
    if (it != counters_.end() && it->second.start_time_ms == c.start_time_ms) {
      uint64_t s = Delta(c.served, it->second.served);
      served += s;
      // What its tiers did not hold, the reader waited for the object store for.
      missed += s - std::min(s, Delta(c.hit, it->second.hit));
      fetched += Delta(c.fetched, it->second.fetched);
    }
    counters[w.worker().id()] = c;
  }
  // A worker that did not answer keeps its last counters, so its next answer counts from them.
  for (auto& [id, c] : counters_) counters.try_emplace(id, c);
  counters_ = std::move(counters);
  // The mounts' reads, by report: a mount seen for the first time counts from its next report.
  std::vector<rpc::ClientReport> clients = clients_->Live();
  uint64_t read = 0;
  std::map<std::string, ClientCounters> client_counters;
  for (const rpc::ClientReport& c : clients) {
    ClientCounters now_c{c.read_bytes(), c.local_bytes(), c.fetched_bytes()};
    auto it = client_counters_.find(c.id());
    if (it != client_counters_.end()) read += Delta(now_c.read, it->second.read);
    client_counters[c.id()] = now_c;
  }
  client_counters_ = std::move(client_counters);
  last_clients_ = std::move(clients);
  last_ = std::move(*report);
  last_at_ = now;
  if (first || seconds <= 0) return;
  Point p;
  p.t_ms = NowMs();
  const uint64_t reads = last_clients_.empty() ? served : read;
  p.served_per_s = static_cast<double>(reads) / seconds;
  p.fetched_per_s = static_cast<double>(fetched) / seconds;
  if (reads > 0) {
    // A mount reports its reads with its view fetches, and its read-ahead's misses are no read
    // yet: an interval's misses may exceed its reads. Clamped.
    p.hit_ratio = 1.0 - std::min(1.0, Ratio(missed, reads));
  }
  points_.push_back(p);
  size_t keep = static_cast<size_t>(std::max<int64_t>(
      1, std::chrono::duration_cast<std::chrono::milliseconds>(options_.history).count() /
             std::max<int64_t>(1, options_.interval.count())));
  while (points_.size() > keep) points_.pop_front();
}

std::string StatusBoard::StatusJson() const {
  json status;
  status["master"] = {
      {"address", options_.address},
      {"version", options_.version},
      {"uptime_seconds",
       std::chrono::duration_cast<std::chrono::seconds>(options_.clock->Now() - started_).count()},
      {"insecure", options_.insecure},
      {"now_ms", NowMs()}};
  rpc::ClusterView view = registry_->View();
  json workers = json::array();
  {
    MutexLock lock(&mu_);
    std::map<std::string, const rpc::WorkerStats*> stats;
    for (const rpc::WorkerStats& w : last_.workers()) stats[w.worker().id()] = &w;
    for (const rpc::WorkerInfo& info : view.workers()) {
      auto it = stats.find(info.id());
      workers.push_back(
          WorkerJson(info, it == stats.end() ? nullptr : it->second, last_.unreachable()));
    }
    json points = json::array();
    for (const Point& p : points_) {
      points.push_back({{"t_ms", p.t_ms},
                        {"served_bytes_per_second", p.served_per_s},
                        {"fetched_bytes_per_second", p.fetched_per_s},
                        {"hit_ratio", p.hit_ratio < 0 ? json(nullptr) : json(p.hit_ratio)}});
    }
    status["history"] = {
        {"interval_seconds", std::chrono::duration<double>(options_.interval).count()},
        {"points", std::move(points)}};
  }
  status["workers"] = std::move(workers);
  json mounts = json::array();
  {
    MutexLock lock(&mu_);
    for (const rpc::ClientReport& c : last_clients_) {
      mounts.push_back({{"id", c.id()},
                        {"host", c.host()},
                        {"mountpoint", c.mountpoint()},
                        {"read_bytes", c.read_bytes()},
                        {"local_bytes", c.local_bytes()},
                        {"fetched_bytes", c.fetched_bytes()}});
    }
  }
  status["mounts"] = std::move(mounts);
  json namespaces = json::array();
  for (const std::string& name : namespaces_->names()) {
    const Namespace* ns = namespaces_->Find(name);
    if (ns == nullptr) continue;
    namespaces.push_back(
        {{"name", name}, {"uri", ns->config.uri}, {"block_size", ns->config.block_size}});
  }
  status["namespaces"] = std::move(namespaces);
  status["loads"] = LoadsJson(loads_->Snapshot());
  return status.dump();
}

void StatusBoard::AddMetrics(metrics::Sink& sink) const {
  rpc::ClusterView view = registry_->View();
  size_t unreachable = 0;
  {
    MutexLock lock(&mu_);
    std::set<std::string> answered;
    for (const rpc::WorkerStats& w : last_.workers()) answered.insert(w.worker().id());
    for (const rpc::WorkerInfo& info : view.workers()) {
      if (!answered.contains(info.id())) ++unreachable;
    }
  }
  const char* help =
      "Workers registered and alive (live), and those of them that did not answer the last "
      "Stats call (unreachable)";
  sink.Gauge("lakecache_master_workers", help, {{"state", "live"}},
             static_cast<double>(view.workers_size()));
  sink.Gauge("lakecache_master_workers", help, {{"state", "unreachable"}},
             static_cast<double>(unreachable));
  sink.Gauge("lakecache_master_namespaces", "Namespaces the master serves", {},
             static_cast<double>(namespaces_->names().size()));
}

std::map<std::string, HttpPage> StatusBoard::Pages() {
  auto page = [this] {
    std::string data = StatusJson();
    // Inside <script>: "</" would end it.
    std::string escaped;
    escaped.reserve(data.size());
    for (size_t i = 0; i < data.size(); ++i) {
      escaped += data[i];
      if (data[i] == '<' && i + 1 < data.size() && data[i + 1] == '/') escaped += '\\';
    }
    std::string html = kStatusPageHtml;
    size_t at = html.find(kPlaceholder);
    if (at != std::string::npos) html.replace(at, sizeof(kPlaceholder) - 1, escaped);
    return HttpReply{200, "text/html; charset=utf-8", std::move(html)};
  };
  return {
      {"/", page}, {"/status", page}, {"/status.json", [this] {
                                         return HttpReply{200, "application/json", StatusJson()};
                                       }}};
}

}  // namespace lakecache
