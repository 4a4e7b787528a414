// lakecache: one binary, subcommands. This file only wires flags to commands.
#include <CLI/CLI.hpp>

#include <malloc.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/unknown_command.h"
#include "common/idle_trim.h"
#include "common/logging.h"
#include "rpc/grpc_log.h"

namespace lakecache::cli {
namespace {

const std::string kVersion = std::string("lakecache ") + kVersionNumber;

// Network buffers (gRPC's, curl's) of a MiB or more come and go by the thousand per second in a
// mount or worker. glibc would map each one afresh (and the kernel zero it page by page); kept in
// the heap, freed buffers are reused. Blocks do not come from the heap (see cache/block.h).
//
// The price is what the heap keeps: freed memory stays in each of glibc's arenas (up to 8 per
// core) at the high-water mark of the threads that use it, so a long-running daemon's RSS creeps
// up for hours (measured by bench/soak: a mount's server from 266 to 385 MB of heap in 10 minutes,
// of which malloc_trim gave back 204 MB). So a thread hands the free pages of every arena back to
// the kernel once every 30 s: the next minute's buffers fault a few pages in again, and the RSS
// stays at what is in use. (A background mount's holder, forked without exec, has no such
// thread: it allocates little; the servers it starts are new processes.) The same thread first
// runs the idle trims (common/idle_trim.h): block mappings pooled for 30 s and S3 connections idle
// for a minute go back.
//
// malloc_trim never shrinks the free top of a thread's arena: glibc does that only on a free, once
// the top passes M_TRIM_THRESHOLD. So each arena may keep up to that threshold resident after its
// threads' last burst (bench/soak saw 12 MB tops over 35 KB in use in a worker, and a mount's
// server holding 230 MB of arenas over 48 MB in use). The threshold is 4 MiB (a buffer of a few
// MiB that comes and goes stays mapped) and there are at most 2 arenas per core (at least 4), so
// what the tops can keep is bounded and reached within minutes, not hours.
void TuneAllocator() {
  ::mallopt(M_MMAP_THRESHOLD, 64 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 4 << 20);
  ::mallopt(M_ARENA_MAX, static_cast<int>(std::max(4u, 2 * std::thread::hardware_concurrency())));
  // With every signal blocked: a process that waits for its signals with signalfd (a mount's
  // holder waits for SIGCHLD) only sees those no thread of it takes.
  sigset_t all, before;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &before);
  std::thread([] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::seconds(30));  // a period, not a wait for an event
      RunIdleTrims();  // pooled block mappings and S3 connections unused for a while go first
      ::malloc_trim(0);
    }
  }).detach();
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

int Main(int argc, char** argv) {
  TuneAllocator();
  CLI::App app{"lakecache: a distributed cache for object storage, for ML training on data lakes",
               "lakecache"};
  app.set_version_flag("--version", kVersion);
  app.require_subcommand(1);
  app.fallthrough();
  GlobalFlags flags;
  std::string timeout = FormatDuration(kDefaultTimeout);
  AddGlobalFlags(app, flags, timeout);
  std::vector<Subcommand> commands;
  for (auto group : {AddObjectCommands(app), AddMountCommand(app, argc, argv),
                     AddServerCommands(app), AddAdminCommands(app), AddToolCommands(app)}) {
    commands.insert(commands.end(), group.begin(), group.end());
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::string unknown = e.get_exit_code() != 0 ? UnknownCommandMessage(app) : "";
    if (!unknown.empty()) {
      std::fprintf(stderr, "lakecache: error: %s\n", unknown.c_str());
      return kExitUsage;
    }
    int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  if (Status s = InitLogging(flags.log_level, flags.log_file); !s.ok()) return ReportError(s);
  rpc::RouteGrpcLogs();
  if (Status s = ParseTimeout(timeout, &flags.timeout); !s.ok()) return ReportError(s);
  if (Status s = RejectSecretOverrides(flags.overrides); !s.ok()) return ReportError(s);
  for (const Subcommand& c : commands) {
    if (*c.app) return c.run(flags);
  }
  return kExitUsage;
}

}  // namespace
}  // namespace lakecache::cli

int main(int argc, char** argv) { return lakecache::cli::Main(argc, argv); }
