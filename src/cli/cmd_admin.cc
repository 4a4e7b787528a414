// lakecache free / stat PATH: the admin commands over rpc::AdminService, served by the master of
// a cluster or by a mount's control socket (docs/admin.md); load and report have files of their
// own (cmd_load.cc, cmd_report.cc), and admin_peer.h is where their calls go.
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

using nlohmann::json;

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
