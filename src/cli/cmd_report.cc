// lakecache report [PATH]: per worker (or the mount) capacity and use per tier, hit ratio and
// cached bytes per namespace, as a table or JSON.
#include <grpcpp/client_context.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "cli/admin_peer.h"
#include "cli/commands.h"
#include "common/mutex.h"
#include "common/units.h"
#include "common/wait_notice.h"
#include "rpc/grpc_util.h"

namespace lakecache::cli {
namespace {

using nlohmann::json;

// Hits over lookups: every lookup starts at the first tier, and a hit in any tier ends it.
struct HitCounts {
  uint64_t hits = 0;
  uint64_t lookups = 0;
  uint64_t fetches = 0;
  uint64_t fetched_bytes = 0;

  void Add(const rpc::WorkerStats& w) {
    for (const rpc::TierStatsProto& t : w.tiers()) hits += t.hits();
    if (!w.tiers().empty()) lookups += w.tiers(0).hits() + w.tiers(0).misses();
    fetches += w.fetches();
    fetched_bytes += w.fetched_bytes();
  }
  double ratio() const {
    return lookups == 0 ? 0.0 : static_cast<double>(hits) / static_cast<double>(lookups);
  }
};

// One kind of tier ("memory", "disk") over several workers. Tiers are not added together: a block
// is often held by both, so the sum would count it twice.
struct TierTotal {
  uint64_t capacity = 0;
  uint64_t used = 0;
  uint64_t blocks = 0;
};
using TierTotals = std::map<std::string, TierTotal>;

std::string TierKind(const std::string& tier) { return tier.substr(0, tier.find(':')); }

void AddTiers(const rpc::WorkerStats& w, TierTotals* totals) {
  for (const rpc::TierStatsProto& t : w.tiers()) {
    TierTotal& total = (*totals)[TierKind(t.tier())];
    total.capacity += t.capacity_bytes();
    total.used += t.used_bytes();
    total.blocks += t.blocks();
  }
}

// The name last: disk tiers are named after their folders, of any length.
void PrintTier(const std::string& name, uint64_t used, uint64_t capacity, uint64_t blocks) {
  std::printf("  %10s of %10s used, %14s  %s\n", HumanByteSize(used).c_str(),
              HumanByteSize(capacity).c_str(), Counted(blocks, "block").c_str(), name.c_str());
}

void PrintHits(const std::string& who, const HitCounts& h) {
  std::printf("%s: hit ratio %.1f%%, %s (%s)\n", who.c_str(), 100 * h.ratio(),
              Counted(h.fetches, "fetch", "fetches").c_str(),
              HumanByteSize(h.fetched_bytes).c_str());
}

void PrintCache(const std::string& who, const rpc::WorkerStats& w) {
  HitCounts hits;
  hits.Add(w);
  PrintHits(who, hits);
  for (const rpc::TierStatsProto& t : w.tiers()) {
    PrintTier(t.tier(), t.used_bytes(), t.capacity_bytes(), t.blocks());
  }
}

json TiersJson(const rpc::WorkerStats& w) {
  json tiers = json::array();
  for (const rpc::TierStatsProto& t : w.tiers()) {
    tiers.push_back({{"tier", t.tier()},
                     {"capacity_bytes", t.capacity_bytes()},
                     {"used_bytes", t.used_bytes()},
                     {"blocks", t.blocks()},
                     {"hits", t.hits()},
                     {"misses", t.misses()}});
  }
  return tiers;
}

json WorkerJson(const rpc::WorkerStats& w) {
  HitCounts hits;
  hits.Add(w);
  json namespaces = json::array();
  for (const rpc::NamespaceUsage& n : w.namespaces()) {
    namespaces.push_back(
        {{"ns", n.ns()}, {"cached_bytes", n.cached_bytes()}, {"blocks", n.blocks()}});
  }
  return {{"id", w.worker().id()},  {"address", w.worker().address()},
          {"reachable", true},      {"hit_ratio", hits.ratio()},
          {"fetches", w.fetches()}, {"fetched_bytes", w.fetched_bytes()},
          {"tiers", TiersJson(w)},  {"namespaces", namespaces}};
}

// What `report` prints, from the workers' (or the mount's) stats.
struct ReportTotals {
  HitCounts hits;
  TierTotals tiers;
  std::map<std::string, std::pair<uint64_t, uint64_t>> per_ns;  // bytes, blocks

  explicit ReportTotals(const rpc::Report& report) {
    for (const rpc::WorkerStats& w : report.workers()) {
      hits.Add(w);
      AddTiers(w, &tiers);
      for (const rpc::NamespaceUsage& n : w.namespaces()) {
        per_ns[n.ns()].first += n.cached_bytes();
        per_ns[n.ns()].second += n.blocks();
      }
    }
  }
};

void PrintReportJson(const AdminTarget& target, const rpc::Report& report,
                     const ReportTotals& totals) {
  json workers = json::array();
  for (const rpc::WorkerStats& w : report.workers()) workers.push_back(WorkerJson(w));
  for (const std::string& u : report.unreachable()) {
    workers.push_back({{"id", u.substr(0, u.find(' '))}, {"reachable", false}, {"error", u}});
  }
  json namespaces = json::array();
  for (const auto& [ns, v] : totals.per_ns) {
    namespaces.push_back({{"ns", ns}, {"cached_bytes", v.first}, {"blocks", v.second}});
  }
  json tiers = json::array();
  for (const auto& [kind, t] : totals.tiers) {
    tiers.push_back({{"tier", kind},
                     {"capacity_bytes", t.capacity},
                     {"used_bytes", t.used},
                     {"blocks", t.blocks}});
  }
  json out{{"target", TargetKind(target)},
           {"address", target.shown},
           {"workers", workers},
           {"totals",
            {{"workers", report.workers_size()},
             {"hit_ratio", totals.hits.ratio()},
             {"fetches", totals.hits.fetches},
             {"tiers", tiers},
             {"namespaces", namespaces}}}};
  std::printf("%s\n", out.dump(2).c_str());
}

// A mount is one cache: its figures once. A cluster: each worker's, then the totals when there
// are several.
void PrintReportText(const AdminTarget& target, const rpc::Report& report,
                     const ReportTotals& totals) {
  if (target.mount() && report.workers_size() == 1) {
    PrintCache("mount " + target.shown, report.workers(0));
  } else {
    std::printf("cluster %s: %s\n", target.shown.c_str(),
                Counted(report.workers_size(), "worker").c_str());
    for (const rpc::WorkerStats& w : report.workers()) {
      PrintCache("worker " + w.worker().id() + " at " + w.worker().address(), w);
    }
    if (report.workers_size() > 1) {
      PrintHits("all " + Counted(report.workers_size(), "worker"), totals.hits);
      for (const auto& [kind, t] : totals.tiers) PrintTier(kind, t.used, t.capacity, t.blocks);
    }
  }
  for (const std::string& u : report.unreachable()) std::printf("unreachable: %s\n", u.c_str());
  std::printf("cached per namespace:\n");
  if (totals.per_ns.empty()) std::printf("  (none)\n");
  for (const auto& [ns, v] : totals.per_ns) {
    std::printf("  %-20s %12s in %s\n", ns.c_str(), HumanByteSize(v.first).c_str(),
                Counted(v.second, "block").c_str());
  }
}

}  // namespace

int RunReport(const AdminCommand& cmd) {
  auto target = ResolveAdminTarget(cmd.path, cmd.master);
  if (!target.ok()) return ReportError(target.status());
  if (target->kind == AdminTarget::Kind::kStore) {
    return UsageError("report " + cmd.path + ": an object-store URI has no cache");
  }
  auto peer = AdminPeer::Open(*target, cmd, "report");
  if (!peer.ok()) return ReportError(peer.status());
  rpc::Report report;
  Status status = peer->RunWithin(
      [&](rpc::AdminService::Stub& stub, grpc::ClientContext* ctx) {
        return stub.GetReport(ctx, rpc::ReportRequest(), &report);
      },
      cmd.timeout, "asking for the report");
  if (!status.ok()) return ReportError(status);
  ReportTotals totals(report);
  if (cmd.json) {
    PrintReportJson(*target, report, totals);
  } else {
    PrintReportText(*target, report, totals);
  }
  return kExitOk;
}

}  // namespace lakecache::cli
