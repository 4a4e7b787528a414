// lakecache load / report / free / stat PATH: the admin commands over rpc::AdminService, served
// by the master of a cluster or by a mount's control socket (docs/admin.md).
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

#include "cli/admin_target.h"
#include "cli/commands.h"
#include "cli/credentials_flag.h"
#include "common/mutex.h"
#include "common/units.h"
#include "master_client/master_set.h"
#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"

namespace lakecache::cli {
namespace {

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

constexpr int kExitInterrupted = 130;
constexpr auto kPlainProgressEvery = std::chrono::seconds(2);
// How long a command waits for a new leader when the cluster's masters are changing theirs: two
// election leases of the default 10 s, and some.
constexpr auto kLeaderChangeWait = std::chrono::seconds(25);

int UsageError(const std::string& message) {
  std::fprintf(stderr, "lakecache: error: %s\n", message.c_str());
  return kExitUsage;
}

// Resolves PATH for a command that needs a cache (not an object store) and a namespace.
Result<AdminTarget> CacheTarget(const std::string& command, const std::string& path,
                                const std::string& master, bool need_namespace) {
  LC_ASSIGN_OR_RETURN(AdminTarget target, ResolveAdminTarget(path, master));
  if (target.kind == AdminTarget::Kind::kStore) {
    return Status::InvalidArgument(command + " " + path +
                                   ": an object-store URI has no cache; give a path inside a "
                                   "lakecache mount or /NAMESPACE/PATH of a cluster");
  }
  if (need_namespace && target.ns.empty()) {
    return Status::InvalidArgument(command + " " + path +
                                   ": name a namespace (/NAMESPACE/PATH, or a folder below a "
                                   "mount's root)");
  }
  return target;
}

// --credentials, else those of the cluster mount PATH is in: the cluster is called as the admin
// role either way. A mount's folder without admin.token is named, with what to pass instead.
Result<std::shared_ptr<const security::ClusterCredentials>> AdminCredentials(
    const AdminTarget& target, const AdminCommand& cmd, const std::string& command) {
  if (!cmd.credentials.empty() || target.mount_credentials.empty()) {
    return OpenCredentials(cmd.credentials, security::Role::kAdmin, "lakecache " + command);
  }
  auto opened =
      OpenCredentials(target.mount_credentials, security::Role::kAdmin, "lakecache " + command);
  if (opened.ok()) return opened;
  return Status(opened.status().code(),
                "the mount at " + target.mountpoint + " calls its master with the credentials in " +
                    target.mount_credentials + ", which " + command +
                    " uses when given no --credentials: " + opened.status().message() +
                    "; pass --credentials DIR (or " + kCredentialsEnv +
                    ") naming a folder with the cluster's admin.token");
}

// Where an admin command's calls go: a mount's control socket, plain (its peer's uid is the
// check), or a cluster's masters over TLS as the admin role when the command has credentials,
// following the leader (master_client/master_set.h).
class AdminPeer {
 public:
  using Call = std::function<grpc::Status(rpc::AdminService::Stub&, grpc::ClientContext*)>;

  static Result<AdminPeer> Open(const AdminTarget& target, const AdminCommand& cmd,
                                const std::string& command) {
    AdminPeer peer;
    peer.target_ = target;
    if (target.mount()) {
      peer.masters_ = std::make_shared<MasterSet>(
          std::vector<std::string>{target.address},
          [](const std::string& address) { return rpc::OpenChannel(address); });
      return peer;
    }
    LC_ASSIGN_OR_RETURN(std::vector<std::string> list, ParseMasterList("--master", target.address));
    LC_ASSIGN_OR_RETURN(std::shared_ptr<const security::ClusterCredentials> credentials,
                        AdminCredentials(target, cmd, command));
    peer.masters_ = std::make_shared<MasterSet>(
        std::move(list),
        [credentials](const std::string& address) {
          return security::MasterChannel(address, credentials.get());
        },
        credentials != nullptr ? rpc::Transport::kTls : rpc::Transport::kPlainText);
    return peer;
  }

  // One unary call: on the mount once; on the cluster's leader, following redirects and waiting
  // out a change of leader.
  Status Run(const Call& call, std::chrono::milliseconds timeout) {
    if (target_.mount()) {
      MasterSet::Master mount = masters_->Current();
      grpc::ClientContext ctx;
      rpc::SetTimeout(&ctx, timeout);
      auto stub = rpc::AdminService::NewStub(mount.channel);
      return rpc::FromGrpcStatus(call(*stub, &ctx), "mount " + target_.shown);
    }
    return masters_->Call(
        [&](const MasterSet::Master& m, grpc::ClientContext* ctx) {
          auto stub = rpc::AdminService::NewStub(m.channel);
          return call(*stub, ctx);
        },
        timeout, std::chrono::system_clock::now() + timeout + kLeaderChangeWait);
  }

  // A unary call as Run makes it, waiting up to `timeout` for the answer (a line on a terminal
  // says it still waits); a wait that ran out says for whom, while `what` was asked.
  Status RunWithin(const Call& call, std::chrono::milliseconds timeout, const std::string& what) {
    auto notice = NoticeWaitFor(Peers(), timeout);
    Status status = Run(call, timeout);
    notice.reset();
    return ExplainTimeout(status, Peers(), what, timeout);
  }

  MasterSet& masters() { return *masters_; }
  // "mount /mnt/lake" or "master HOST:PORT": who gave `status`.
  std::string Name(const std::string& address) const {
    return target_.mount() ? "mount " + target_.shown : "master " + address;
  }
  // "mount /mnt/lake", "master at HOST:PORT" or "masters A,B": whom the command waits for.
  std::string Peers() const {
    return target_.mount() ? "mount " + target_.shown : masters_->Describe();
  }

 private:
  AdminTarget target_;
  std::shared_ptr<MasterSet> masters_;
};

std::string TargetKind(const AdminTarget& target) { return target.mount() ? "mount" : "cluster"; }

std::string Clock(double seconds) {
  if (seconds < 0 || seconds > 359999) return "--:--";
  int s = static_cast<int>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%d:%02d", s / 60, s % 60);
  }
  return buf;
}

json Counts(const rpc::LoadProgress& p, bool bytes) {
  auto pick = [&](const rpc::LoadCounts& c) { return bytes ? c.bytes() : c.files(); };
  return json{{"total", pick(p.total())},
              {"loaded", pick(p.loaded())},
              {"already_cached", pick(p.already_cached())},
              {"failed", pick(p.failed())}};
}

// Progress on stderr: a bar redrawn in place on a terminal, plain lines otherwise.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(std::string what) : what_(std::move(what)), tty_(::isatty(2) == 1) {}

  void Update(const rpc::LoadProgress& p) {
    auto now = SteadyClock::now();
    auto every = tty_ ? std::chrono::milliseconds(200) : kPlainProgressEvery;
    if (p.done() || now - last_ < every) return;
    last_ = now;
    uint64_t done = p.loaded().bytes() + p.already_cached().bytes() + p.failed().bytes();
    double rate = p.seconds() > 0 ? static_cast<double>(done) / p.seconds() : 0;
    double eta =
        rate > 0 ? static_cast<double>(p.total().bytes() - std::min(done, p.total().bytes())) / rate
                 : -1;
    char line[256];
    std::snprintf(line, sizeof(line), "files %llu/%llu  bytes %s/%s  %s/s  ETA %s",
                  static_cast<unsigned long long>(p.files_done()),
                  static_cast<unsigned long long>(p.total().files()), HumanByteSize(done).c_str(),
                  HumanByteSize(p.total().bytes()).c_str(),
                  HumanByteSize(static_cast<uint64_t>(rate)).c_str(), Clock(eta).c_str());
    if (tty_) {
      std::fprintf(stderr, "\r\033[K%s", line);
      drawn_ = true;
    } else {
      std::fprintf(stderr, "lakecache: load %s: %s\n", what_.c_str(), line);
    }
    std::fflush(stderr);
  }

  void Finish() {
    if (drawn_) std::fprintf(stderr, "\r\033[K");
    drawn_ = false;
  }

 private:
  const std::string what_;
  const bool tty_;
  bool drawn_ = false;
  SteadyClock::time_point last_{};
};

// SIGINT/SIGTERM cancel the call in flight instead of killing the process, so the summary of
// what was done still prints. Blocks the signals in every thread (call before any other thread
// starts) and waits for them on a thread of its own, which may outlive the watcher: what it
// touches is shared with it, and the destructor unwatches so a late signal cancels nothing.
class InterruptWatcher {
 public:
  InterruptWatcher() : state_(std::make_shared<State>()) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::thread([state = state_, set] {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) return;
      state->interrupted = true;
      MutexLock lock(&state->mu);
      if (state->context != nullptr) state->context->TryCancel();
    }).detach();
  }
  ~InterruptWatcher() { Unwatch(); }
  InterruptWatcher(const InterruptWatcher&) = delete;
  InterruptWatcher& operator=(const InterruptWatcher&) = delete;

  void Watch(grpc::ClientContext* context) {
    MutexLock lock(&state_->mu);
    state_->context = context;
    if (state_->interrupted) context->TryCancel();
  }
  void Unwatch() {
    MutexLock lock(&state_->mu);
    state_->context = nullptr;
  }
  bool interrupted() const { return state_->interrupted; }

 private:
  struct State {
    std::atomic<bool> interrupted{false};
    Mutex mu;
    grpc::ClientContext* context GUARDED_BY(mu) = nullptr;
  };
  const std::shared_ptr<State> state_;
};

// Cancels a call whose peer has not begun to answer (its initial metadata) within `timeout`: a
// load may run for hours, but it must start within --timeout.
class StartWatchdog {
 public:
  StartWatchdog(grpc::ClientContext* context, std::chrono::milliseconds timeout)
      : thread_([this, context, deadline = SteadyClock::now() + timeout] {
          MutexLock lock(&mu_);
          while (!disarmed_ && SteadyClock::now() < deadline) cv_.WaitUntil(&mu_, deadline);
          if (disarmed_) return;
          fired_ = true;
          context->TryCancel();
        }) {}
  ~StartWatchdog() { Disarm(); }
  StartWatchdog(const StartWatchdog&) = delete;
  StartWatchdog& operator=(const StartWatchdog&) = delete;

  // The call answered (or ended): no cancel after this returns.
  void Disarm() {
    {
      MutexLock lock(&mu_);
      disarmed_ = true;
    }
    cv_.SignalAll();
    if (thread_.joinable()) thread_.join();
  }
  // Whether the call was cancelled for want of an answer.
  bool fired() {
    MutexLock lock(&mu_);
    return fired_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool disarmed_ GUARDED_BY(mu_) = false;
  bool fired_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: it uses the members above
};

void PrintLoadSummary(const AdminTarget& target, const LoadCommand& cmd, const rpc::LoadProgress& p,
                      bool complete) {
  if (cmd.json) {
    json failures = json::array();
    for (const rpc::LoadFailure& f : p.failures()) {
      failures.push_back({{"path", "/" + target.ns + "/" + f.path()}, {"error", f.error()}});
    }
    json out{{"path", target.Display()},  {"target", TargetKind(target)},
             {"address", target.shown},   {"metadata_only", cmd.metadata_only},
             {"replicas", p.replicas()},  {"complete", complete},
             {"seconds", p.seconds()},    {"dirs", p.dirs()},
             {"files", Counts(p, false)}, {"bytes", Counts(p, true)},
             {"failures", failures}};
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("%s %s (%s %s)%s in %.1f s: %s, %s, %s\n", cmd.metadata_only ? "listed" : "loaded",
              target.Display().c_str(), TargetKind(target).c_str(), target.shown.c_str(),
              complete ? "" : ", interrupted", p.seconds(), Counted(p.dirs(), "folder").c_str(),
              Counted(p.total().files(), "file").c_str(), HumanByteSize(p.total().bytes()).c_str());
  if (cmd.metadata_only) return;
  auto row = [](const char* name, const rpc::LoadCounts& c) {
    std::printf("  %-15s %16s  %12s\n", name, Counted(c.files(), "file").c_str(),
                HumanByteSize(c.bytes()).c_str());
  };
  row("loaded", p.loaded());
  row("already cached", p.already_cached());
  row("failed", p.failed());
  for (const rpc::LoadFailure& f : p.failures()) {
    std::printf("  failed: /%s/%s: %s\n", target.ns.c_str(), f.path().c_str(), f.error().c_str());
  }
  if (p.failed().files() > static_cast<uint64_t>(p.failures_size())) {
    std::printf("  ... and %s more\n",
                Counted(p.failed().files() - p.failures_size(), "failed file").c_str());
  }
}

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

int RunLoad(const LoadCommand& cmd) {
  InterruptWatcher interrupts;
  auto target = CacheTarget("load", cmd.path, cmd.master, /*need_namespace=*/true);
  if (!target.ok()) return ReportError(target.status());
  auto peer = AdminPeer::Open(*target, cmd, "load");
  if (!peer.ok()) return ReportError(peer.status());
  rpc::LoadRequest request;
  request.set_ns(target->ns);
  request.set_path(target->path);
  request.set_recursive(cmd.recursive);
  request.set_metadata_only(cmd.metadata_only);
  request.set_replicas(cmd.replicas);
  ProgressPrinter printer(target->Display());
  if (::isatty(2) != 1) {
    std::fprintf(stderr, "lakecache: load %s: listing\n", target->Display().c_str());
  }
  rpc::LoadProgress last;
  bool got_any = false;
  grpc::Status status;
  std::string asked;  // the master (or mount) that ran the load
  // The load runs on the cluster's leader: a follower's redirect, or a master that does not answer
  // before the load starts, moves it to another; one that goes away mid-load ends it (rerun).
  bool gave_up = false;       // every master asked, none ran the load: attempts says why
  bool started_late = false;  // cancelled: no answer within --timeout
  MasterSet::Attempts attempts(peer->masters(),
                               std::chrono::system_clock::now() + kLeaderChangeWait);
  for (;;) {
    MasterSet::Master master = peer->masters().Current();
    asked = master.address;
    grpc::ClientContext ctx;
    interrupts.Watch(&ctx);
    auto reader = rpc::AdminService::NewStub(master.channel)->Load(&ctx, request);
    {
      auto notice = NoticeWaitFor(peer->Name(asked), cmd.timeout);
      StartWatchdog watchdog(&ctx, cmd.timeout);
      reader->WaitForInitialMetadata();
      watchdog.Disarm();
      started_late = watchdog.fired();
    }
    for (rpc::LoadProgress p; reader->Read(&p);) {
      printer.Update(p);
      last = p;
      got_any = true;
    }
    status = reader->Finish();
    interrupts.Unwatch();
    if (started_late && !interrupts.interrupted()) {
      return ReportError(ExplainTimeout(
          Status::DeadlineExceeded(peer->Name(asked) + ": the load did not start"),
          peer->Name(asked), "starting the load of " + target->Display(), cmd.timeout));
    }
    if (status.ok() || got_any || interrupts.interrupted() || target->mount()) break;
    if (!attempts.Again(master, status, ctx)) {
      gave_up = true;
      break;
    }
  }
  printer.Finish();
  if (interrupts.interrupted()) {
    if (got_any) PrintLoadSummary(*target, cmd, last, /*complete=*/false);
    std::fprintf(stderr, "lakecache: load %s interrupted; run it again to resume\n",
                 target->Display().c_str());
    return kExitInterrupted;
  }
  // (ABORTED: the master answered that it stopped leading, and says what to do.)
  if (!status.ok() && got_any && status.error_code() != grpc::StatusCode::ABORTED &&
      rpc::FromGrpcStatus(status, "").peer_failed()) {
    std::fprintf(stderr,
                 "lakecache: error: %s went away during the load of %s (%s). Loads run on the "
                 "cluster's leading master and end with it: run `lakecache load` again (blocks "
                 "already cached are skipped)\n",
                 peer->Name(asked).c_str(), target->Display().c_str(),
                 status.error_message().c_str());
    return kExitFailure;
  }
  if (!status.ok()) {
    return ReportError(gave_up ? attempts.Error() : rpc::FromGrpcStatus(status, peer->Name(asked)));
  }
  if (!last.done()) {
    std::fprintf(stderr, "lakecache: error: the load of %s ended without a final report\n",
                 target->Display().c_str());
    return kExitFailure;
  }
  PrintLoadSummary(*target, cmd, last, last.complete());
  return last.failed().files() == 0 ? kExitOk : kExitFailure;
}

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

int RunFree(const AdminCommand& cmd) {
  auto target = CacheTarget("free", cmd.path, cmd.master, /*need_namespace=*/true);
  if (!target.ok()) return ReportError(target.status());
  auto peer = AdminPeer::Open(*target, cmd, "free");
  if (!peer.ok()) return ReportError(peer.status());
  rpc::FreePathRequest request;
  request.set_ns(target->ns);
  request.set_path(target->path);
  request.set_recursive(cmd.recursive);
  rpc::FreePathResponse response;
  Status status = peer->RunWithin(
      [&](rpc::AdminService::Stub& stub, grpc::ClientContext* ctx) {
        return stub.FreePath(ctx, request, &response);
      },
      cmd.timeout, "freeing " + target->Display());
  if (!status.ok()) return ReportError(status);
  if (cmd.json) {
    json out{{"path", target->Display()},
             {"files", response.files()},
             {"blocks_freed", response.blocks_freed()}};
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("freed %s (%s %s): %s, %s\n", target->Display().c_str(),
                TargetKind(*target).c_str(), target->shown.c_str(),
                Counted(response.files(), "file").c_str(),
                Counted(response.blocks_freed(), "block").c_str());
  }
  return kExitOk;
}

int RunPathStat(const AdminCommand& cmd) {
  auto target = CacheTarget("stat", cmd.path, cmd.master, /*need_namespace=*/true);
  if (!target.ok()) return ReportError(target.status());
  auto peer = AdminPeer::Open(*target, cmd, "stat");
  if (!peer.ok()) return ReportError(peer.status());
  rpc::StatPathRequest request;
  request.set_ns(target->ns);
  request.set_path(target->path);
  rpc::StatPathResponse r;
  Status status =
      peer->RunWithin([&](rpc::AdminService::Stub& stub,
                          grpc::ClientContext* ctx) { return stub.StatPath(ctx, request, &r); },
                      cmd.timeout, "asking for " + target->Display());
  if (!status.ok()) return ReportError(status);
  const char* type = r.is_dir() ? "directory" : "file";
  if (cmd.json) {
    json out{{"path", target->Display()},        {"type", type},
             {"size", r.entry().size()},         {"etag", r.entry().etag()},
             {"mtime", r.entry().mtime()},       {"block_size", r.block_size()},
             {"blocks_total", r.blocks_total()}, {"blocks_cached", r.blocks_cached()},
             {"cached_bytes", r.cached_bytes()}};
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  std::printf("path: %s\ntype: %s\n", target->Display().c_str(), type);
  if (r.is_dir()) return kExitOk;
  double pct = r.blocks_total() == 0 ? 100.0
                                     : 100.0 * static_cast<double>(r.blocks_cached()) /
                                           static_cast<double>(r.blocks_total());
  std::printf(
      "size: %llu\netag: %s\nlast_modified: %s\nblock_size: %llu\ncached_blocks: %llu/%llu "
      "(%.1f%%, %s)\n",
      static_cast<unsigned long long>(r.entry().size()), r.entry().etag().c_str(),
      Iso8601(r.entry().mtime()).c_str(), static_cast<unsigned long long>(r.block_size()),
      static_cast<unsigned long long>(r.blocks_cached()),
      static_cast<unsigned long long>(r.blocks_total()), pct,
      HumanByteSize(r.cached_bytes()).c_str());
  return kExitOk;
}

}  // namespace lakecache::cli
