#include "cli/admin_peer.h"

#include <cstdio>

#include "cli/credentials_flag.h"
#include "common/wait_notice.h"
#include "rpc/grpc_util.h"

namespace lakecache::cli {
namespace {

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

}  // namespace

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

std::string TargetKind(const AdminTarget& target) { return target.mount() ? "mount" : "cluster"; }

Result<AdminPeer> AdminPeer::Open(const AdminTarget& target, const AdminCommand& cmd,
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

Status AdminPeer::Run(const Call& call, std::chrono::milliseconds timeout) {
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

Status AdminPeer::RunWithin(const Call& call, std::chrono::milliseconds timeout,
                            const std::string& what) {
  auto notice = NoticeWaitFor(Peers(), timeout);
  Status status = Run(call, timeout);
  notice.reset();
  return ExplainTimeout(status, Peers(), what, timeout);
}

}  // namespace lakecache::cli
