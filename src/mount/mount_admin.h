// MountAdmin: the admin commands of one mount, served on its control socket (a Unix socket outside
// the mounted tree; see ControlSocketPath), so that `lakecache load /mnt/lake/ds/train` reaches
// the mount the path is in. A standalone mount loads into, frees from and reports its own
// BlockStore (StoreSink); a cluster mount answers Hello with its master's address and its
// credentials folder, and the CLI takes the command there.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "admin/load_jobs.h"
#include "common/result.h"
#include "fs/file_system.h"
#include "rpc/health.h"
#include "rpc/lakecache.pb.h"

namespace grpc {
class Service;
}  // namespace grpc

namespace lakecache {

namespace rpc {
class UnixServer;
}  // namespace rpc

struct MountAdminOptions {
  std::string socket_path;
  std::string mountpoint;
  std::string master;  // cluster mount: HOST:PORT of the master
  // Cluster mount: its --credentials folder, an absolute path (empty: plain text). Hello names
  // it, never what is in it, so that admin commands on paths in the mount call as it does.
  std::string credentials;
  std::string root_namespace;  // quick form: the namespace shown at the mountpoint's root
  // Uids whose commands the control socket serves besides the mount's own and root's
  // (--allow-uid, client.allow_uids); others are refused.
  std::vector<uid_t> allow_uids;
  // The mount's health (rpc/health.h), served on the same socket; null: not served.
  rpc::HealthProbe health;
};

class MountAdmin {
 public:
  static Result<std::unique_ptr<MountAdmin>> Start(std::shared_ptr<FileSystem> fs,
                                                   MountAdminOptions options);
  ~MountAdmin();  // stops serving and removes the socket
  MountAdmin(const MountAdmin&) = delete;
  MountAdmin& operator=(const MountAdmin&) = delete;

  // The loads running through the control socket.
  const LoadJobTable& load_jobs() const { return *load_jobs_; }

 private:
  class Backend;
  MountAdmin() = default;

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<grpc::Service> service_;
  const LoadJobTable* load_jobs_ = nullptr;  // service_'s
  std::unique_ptr<grpc::Service> health_;
  std::unique_ptr<rpc::UnixServer> server_;
};

// The mount's cache as `report` shows it: one "worker" with the mount's tiers and counters.
rpc::WorkerStats MountStats(FileSystem& fs, const std::string& mountpoint);

// Where the control socket of the mount at `mountpoint` (an absolute, canonical path) lives:
// $LAKECACHE_RUN_DIR, else $XDG_RUNTIME_DIR/lakecache, else /run/lakecache for root and
// /tmp/lakecache-UID for others; the file is mount-<16 hex digits of a hash of the
// mountpoint>.sock.
std::string ControlSocketPath(const std::string& mountpoint);

}  // namespace lakecache
