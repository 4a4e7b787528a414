// lakecache load PATH: caches a path's listings and data through rpc::AdminService (the master of
// a cluster, or a mount's control socket), with progress on stderr and a summary on stdout.
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
using SteadyClock = std::chrono::steady_clock;

constexpr int kExitInterrupted = 130;
constexpr auto kPlainProgressEvery = std::chrono::seconds(2);

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
    // While the tree is being listed, the totals are what was listed so far ("+") and no ETA.
    const char* more = p.listed() ? "" : "+";
    char line[256];
    std::snprintf(line, sizeof(line), "files %llu/%llu%s  bytes %s/%s%s  %s/s  ETA %s",
                  static_cast<unsigned long long>(p.files_done()),
                  static_cast<unsigned long long>(p.total().files()), more,
                  HumanByteSize(done).c_str(), HumanByteSize(p.total().bytes()).c_str(), more,
                  HumanByteSize(static_cast<uint64_t>(rate)).c_str(),
                  p.listed() ? Clock(eta).c_str() : "listing");
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

}  // namespace

namespace {

// What a load's calls came to.
struct LoadRun {
  rpc::LoadProgress last;
  bool got_any = false;
  grpc::Status status;
  std::string asked;          // the master (or mount) that ran the load
  bool started_late = false;  // cancelled: no answer within --timeout
  bool gave_up = false;       // every master asked, none ran the load: attempts says why
};

// Runs the load on the cluster's leader: a follower's redirect, or a master that does not answer
// before the load starts, moves it to another; one that goes away mid-load ends it (rerun).
LoadRun CallLoad(AdminPeer& peer, const AdminTarget& target, const LoadCommand& cmd,
                 const rpc::LoadRequest& request, InterruptWatcher& interrupts,
                 ProgressPrinter& printer, MasterSet::Attempts& attempts) {
  LoadRun run;
  for (;;) {
    MasterSet::Master master = peer.masters().Current();
    run.asked = master.address;
    grpc::ClientContext ctx;
    interrupts.Watch(&ctx);
    auto reader = rpc::AdminService::NewStub(master.channel)->Load(&ctx, request);
    {
      auto notice = NoticeWaitFor(peer.Name(run.asked), cmd.timeout);
      StartWatchdog watchdog(&ctx, cmd.timeout);
      reader->WaitForInitialMetadata();
      watchdog.Disarm();
      run.started_late = watchdog.fired();
    }
    for (rpc::LoadProgress p; reader->Read(&p);) {
      printer.Update(p);
      run.last = p;
      run.got_any = true;
    }
    run.status = reader->Finish();
    interrupts.Unwatch();
    if (run.started_late && !interrupts.interrupted()) return run;
    if (run.status.ok() || run.got_any || interrupts.interrupted() || target.mount()) return run;
    if (!attempts.Again(master, run.status, ctx)) {
      run.gave_up = true;
      return run;
    }
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
  MasterSet::Attempts attempts(peer->masters(),
                               std::chrono::system_clock::now() + kLeaderChangeWait);
  LoadRun run = CallLoad(*peer, *target, cmd, request, interrupts, printer, attempts);
  if (run.started_late && !interrupts.interrupted()) {
    return ReportError(ExplainTimeout(
        Status::DeadlineExceeded(peer->Name(run.asked) + ": the load did not start"),
        peer->Name(run.asked), "starting the load of " + target->Display(), cmd.timeout));
  }
  printer.Finish();
  if (interrupts.interrupted()) {
    if (run.got_any) PrintLoadSummary(*target, cmd, run.last, /*complete=*/false);
    std::fprintf(stderr, "lakecache: load %s interrupted; run it again to resume\n",
                 target->Display().c_str());
    return kExitInterrupted;
  }
  const grpc::Status& status = run.status;
  // (ABORTED: the master answered that it stopped leading, and says what to do.)
  if (!status.ok() && run.got_any && status.error_code() != grpc::StatusCode::ABORTED &&
      rpc::FromGrpcStatus(status, "").peer_failed()) {
    std::fprintf(stderr,
                 "lakecache: error: %s went away during the load of %s (%s). Loads run on the "
                 "cluster's leading master and end with it: run `lakecache load` again (blocks "
                 "already cached are skipped)\n",
                 peer->Name(run.asked).c_str(), target->Display().c_str(),
                 status.error_message().c_str());
    return kExitFailure;
  }
  if (!status.ok()) {
    return ReportError(run.gave_up ? attempts.Error()
                                   : rpc::FromGrpcStatus(status, peer->Name(run.asked)));
  }
  if (!run.last.done()) {
    std::fprintf(stderr, "lakecache: error: the load of %s ended without a final report\n",
                 target->Display().c_str());
    return kExitFailure;
  }
  PrintLoadSummary(*target, cmd, run.last, run.last.complete());
  return run.last.failed().files() == 0 ? kExitOk : kExitFailure;
}

}  // namespace lakecache::cli
