// Where an admin command (load, report, free, stat PATH; docs/admin.md) sends its calls, and the
// checks they share: the cache PATH names (a mount's or a cluster's, never an object store's),
// and the credentials a cluster is called with. For the CLI's main thread.
#pragma once

#include <grpcpp/client_context.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "cli/admin_target.h"
#include "cli/commands.h"
#include "common/result.h"
#include "master_client/master_set.h"
#include "rpc/lakecache.grpc.pb.h"

namespace lakecache::cli {

// How long a command waits for a new leader when the cluster's masters are changing theirs: two
// election leases of the default 10 s, and some.
inline constexpr auto kLeaderChangeWait = std::chrono::seconds(25);

// Prints `message` as an error; the usage exit code.
int UsageError(const std::string& message);

// Resolves PATH for a command that needs a cache (not an object store) and a namespace.
Result<AdminTarget> CacheTarget(const std::string& command, const std::string& path,
                                const std::string& master, bool need_namespace);

// "mount" or "cluster".
std::string TargetKind(const AdminTarget& target);

// Where an admin command's calls go: a mount's control socket, plain (its peer's uid is the
// check), or a cluster's masters over TLS as the admin role when the command has credentials,
// following the leader (master_client/master_set.h).
class AdminPeer {
 public:
  using Call = std::function<grpc::Status(rpc::AdminService::Stub&, grpc::ClientContext*)>;

  static Result<AdminPeer> Open(const AdminTarget& target, const AdminCommand& cmd,
                                const std::string& command);

  // One unary call: on the mount once; on the cluster's leader, following redirects and waiting
  // out a change of leader.
  Status Run(const Call& call, std::chrono::milliseconds timeout);

  // A unary call as Run makes it, waiting up to `timeout` for the answer (a line on a terminal
  // says it still waits); a wait that ran out says for whom, while `what` was asked.
  Status RunWithin(const Call& call, std::chrono::milliseconds timeout, const std::string& what);

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

}  // namespace lakecache::cli
