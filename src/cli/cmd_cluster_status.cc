// `lakecache cluster status`: what any master (local or not) sees, and what each of its workers
// says of itself: capacity, usage, blocks per tier, fetches, blocks served.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/credentials_flag.h"
#include "common/units.h"
#include "master_client/master_set.h"
#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"
#include "security/auth.h"

namespace lakecache::cli {
namespace {

// ---- cluster status -----------------------------------------------------------------------------

using Json = nlohmann::ordered_json;  // keys in the documented order

// Each worker: a status is most wanted when something is down, so a silent worker must not hang
// it. The master's view gets --timeout (a new TLS connection to a busy host may take seconds).
constexpr auto kStatusCallTimeout = std::chrono::seconds(3);

// One worker: as the master lists it, with capacity and usage replaced by the worker's own when
// it answered.
struct WorkerStatus {
  rpc::WorkerInfo info;
  std::optional<rpc::WorkerStats> stats;  // empty: the worker did not answer
  std::string error;                      // why, when it did not
};

WorkerStatus AskWorker(const rpc::WorkerInfo& listed,
                       const security::ClusterCredentials* credentials) {
  WorkerStatus out{listed, std::nullopt, ""};
  auto stub = rpc::WorkerService::NewStub(
      security::WorkerChannel(listed.address(), listed.id(), credentials));
  grpc::ClientContext context;
  rpc::SetTimeout(&context, kStatusCallTimeout);
  rpc::WorkerStats stats;
  grpc::Status s = stub->Stats(&context, rpc::WorkerStatsRequest(), &stats);
  if (!s.ok()) {
    out.error = rpc::FromGrpcStatus(s, "worker " + listed.address()).message();
    return out;
  }
  // Capacity and usage as the worker reports them now, not as of its last heartbeat.
  out.info.set_capacity_bytes(stats.worker().capacity_bytes());
  out.info.set_used_bytes(stats.worker().used_bytes());
  out.stats = std::move(stats);
  return out;
}

// All workers at once: N silent workers cost one timeout, not N.
std::vector<WorkerStatus> AskWorkers(const rpc::ClusterView& view,
                                     const security::ClusterCredentials* credentials) {
  std::vector<std::future<WorkerStatus>> pending;
  for (const rpc::WorkerInfo& w : view.workers()) {
    pending.push_back(std::async(std::launch::async, AskWorker, w, credentials));
  }
  std::vector<WorkerStatus> out;
  for (std::future<WorkerStatus>& p : pending) out.push_back(p.get());
  return out;
}

Json WorkerJson(const WorkerStatus& w) {
  Json out = {{"id", w.info.id()},
              {"address", w.info.address()},
              {"insecure", w.info.insecure()},
              {"capacity_bytes", w.info.capacity_bytes()},
              {"used_bytes", w.info.used_bytes()}};
  Json tiers = Json::array();
  if (w.stats) {
    out["fetches"] = w.stats->fetches();
    out["blocks_served"] = w.stats->blocks_served();
    out["bytes_served"] = w.stats->bytes_served();
    out["blocks_located"] = w.stats->blocks_located();  // short-circuit reads by local clients
    // The memory tier shared with the mounts on the worker's host.
    out["shared_memory"] = {{"sessions", w.stats->shm_sessions()},
                            {"published_bytes", w.stats->shm_published_bytes()},
                            {"deferred_bytes", w.stats->shm_deferred_bytes()},
                            {"refused", w.stats->shm_refused()},
                            {"publish_failures", w.stats->shm_publish_failures()}};
    for (const rpc::TierStatsProto& t : w.stats->tiers()) {
      tiers.push_back({{"tier", t.tier()},
                       {"blocks", t.blocks()},
                       {"used_bytes", t.used_bytes()},
                       {"capacity_bytes", t.capacity_bytes()},
                       {"hits", t.hits()},
                       {"misses", t.misses()}});
    }
  } else {
    out["fetches"] = nullptr;  // unknown, not zero
    out["blocks_served"] = nullptr;
    out["bytes_served"] = nullptr;
    out["blocks_located"] = nullptr;
  }
  out["tiers"] = std::move(tiers);
  out["reachable"] = w.stats.has_value();
  if (!w.stats) out["error"] = w.error;
  return out;
}

// The epoch is the master's start in Unix ms, plus one for every change of the view since: read as
// a time, it says when this master's view began.
std::string EpochTime(uint64_t epoch_ms) { return Iso8601(static_cast<int64_t>(epoch_ms / 1000)); }

// "3m12s ago"; "just now" under a second, and for an epoch from a clock ahead of ours.
std::string EpochAge(uint64_t epoch_ms) {
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  int64_t age_s = (now.count() - static_cast<int64_t>(epoch_ms)) / 1000;
  if (age_s < 1) return "just now";
  return FormatDuration(std::chrono::seconds(age_s)) + " ago";
}

void PrintJson(const rpc::ClusterView& view, const std::vector<WorkerStatus>& workers) {
  Json workers_json = Json::array();
  for (const WorkerStatus& w : workers) workers_json.push_back(WorkerJson(w));
  Json out = {{"epoch", view.epoch()},
              {"epoch_time", view.etcd() ? Json(nullptr) : Json(EpochTime(view.epoch()))},
              {"etcd", view.etcd()},
              {"leader", view.leader()},
              {"stale", view.stale()},
              {"master", view.address()},
              {"insecure", view.insecure()},
              {"workers", std::move(workers_json)}};
  std::printf("%s\n", out.dump(2, ' ', false, Json::error_handler_t::replace).c_str());
}

// "1.5 GiB", "12.0 MiB", "512 B": for people; --json has the exact bytes.
// "memory 12, disk 340": each tier's kind ("disk:/var/cache/x" -> "disk") and its blocks.
std::string TierBlocks(const rpc::WorkerStats& stats) {
  std::string out;
  for (const rpc::TierStatsProto& t : stats.tiers()) {
    if (!out.empty()) out += ", ";
    out += t.tier().substr(0, t.tier().find(':')) + " " + std::to_string(t.blocks());
  }
  return out.empty() ? "-" : out;
}

// Left-aligned columns two spaces apart; the first row is the header.
void PrintColumns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size() + 2, ' ');
    }
    std::printf("%s\n", line.c_str());
  }
}

// One line for each server that serves plain text beyond loopback (--insecure).
void PrintInsecure(const rpc::ClusterView& view, const std::vector<WorkerStatus>& workers) {
  constexpr char kWhy[] =
      "serves in plain text beyond loopback without authentication (--insecure): anyone who "
      "reaches it can";
  if (view.insecure()) {
    std::printf("WARNING: master %s %s list every namespace and join workers\n",
                view.address().c_str(), kWhy);
  }
  for (const WorkerStatus& w : workers) {
    if (!w.info.insecure()) continue;
    std::printf("WARNING: worker %s at %s %s read every cached byte\n", w.info.id().c_str(),
                w.info.address().c_str(), kWhy);
  }
}

void PrintTable(const rpc::ClusterView& view, const std::vector<WorkerStatus>& workers) {
  if (view.etcd()) {
    std::printf("epoch %llu (etcd revision%s), %s\n", static_cast<unsigned long long>(view.epoch()),
                view.stale() ? "; etcd out of reach, the last view seen" : "",
                Counted(workers.size(), "worker").c_str());
  } else {
    std::printf("epoch %s (%s; %llu), %s\n", EpochTime(view.epoch()).c_str(),
                EpochAge(view.epoch()).c_str(), static_cast<unsigned long long>(view.epoch()),
                Counted(workers.size(), "worker").c_str());
  }
  if (!view.address().empty()) std::printf("master %s\n", view.address().c_str());
  if (view.etcd())
    std::printf("leader %s\n", view.leader().empty() ? "(none known)" : view.leader().c_str());
  PrintInsecure(view, workers);
  if (workers.empty()) return;
  std::vector<std::vector<std::string>> rows = {
      {"ID", "ADDRESS", "CAPACITY", "USED", "BLOCKS", "FETCHES", "SERVED"}};
  for (const WorkerStatus& w : workers) {
    std::vector<std::string> row = {w.info.id(), w.info.address(),
                                    HumanByteSize(w.info.capacity_bytes()),
                                    HumanByteSize(w.info.used_bytes())};
    if (w.stats) {
      row.insert(row.end(), {TierBlocks(*w.stats), std::to_string(w.stats->fetches()),
                             std::to_string(w.stats->blocks_served())});
    } else {
      row.insert(row.end(), {"unreachable", "-", "-"});
    }
    rows.push_back(std::move(row));
  }
  PrintColumns(rows);
}

}  // namespace

int RunClusterStatus(const ClusterStatusRequest& request) {
  if (request.master.empty()) {
    return ReportError(Status::InvalidArgument(
        "cluster status: which master? Pass --master HOST:PORT or set " + std::string(kMasterEnv) +
        "=HOST:PORT (the address `lakecache cluster up` prints on its last line, or the master's "
        "--listen)"));
  }
  auto list = ParseMasterList("--master", request.master);
  if (!list.ok()) return ReportError(list.status());
  auto credentials =
      OpenCredentials(request.credentials, security::Role::kAdmin, "lakecache cluster status");
  if (!credentials.ok()) return ReportError(credentials.status());
  // Every master serves the view: the first that answers does (each gets --timeout, two at most).
  MasterSet masters(
      std::move(*list),
      [c = *credentials](const std::string& address) {
        return security::MasterChannel(address, c.get());
      },
      *credentials != nullptr ? rpc::Transport::kTls : rpc::Transport::kPlainText);
  rpc::ClusterView view;
  auto notice = NoticeWaitFor(masters.Describe(), request.timeout);
  Status s = masters.Call(
      [&](const MasterSet::Master& m, grpc::ClientContext* context) {
        return rpc::MasterService::NewStub(m.channel)->GetClusterView(
            context, rpc::ClusterViewRequest(), &view);
      },
      request.timeout, std::chrono::system_clock::now() + 2 * request.timeout);
  notice.reset();
  if (s.code() == StatusCode::kInvalidArgument) return ReportError(s);  // says what to pass
  if (s.code() == StatusCode::kDeadlineExceeded) {
    return ReportError(
        ExplainTimeout(s, masters.Describe(), "asking for the cluster's view", request.timeout));
  }
  if (!s.ok()) {
    // Whatever the gRPC code, the master could not be asked: a failure (1), not a usage error.
    std::fprintf(stderr, "lakecache: error: cluster status: no answer from the %s: %s\n",
                 masters.Describe().c_str(), s.message().c_str());
    return kExitFailure;
  }
  std::vector<WorkerStatus> workers = AskWorkers(view, credentials->get());
  if (request.json) {
    PrintJson(view, workers);
  } else {
    PrintTable(view, workers);
  }
  std::fflush(stdout);
  return kExitOk;
}

}  // namespace lakecache::cli
