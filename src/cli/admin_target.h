// Which cache an admin command (load, report, free, stat) talks to, from its PATH argument (see
// docs/admin.md): an object-store URI is the store itself; a path inside a mounted lakecache file
// system is that mount (its control socket; a cluster mount sends the command on to its master);
// otherwise "/ns/path" names a namespace of the cluster at --master or LAKECACHE_MASTER.
#pragma once

#include <chrono>
#include <string>

#include "common/result.h"
#include "rpc/lakecache.pb.h"

namespace lakecache::cli {

struct AdminTarget {
  enum class Kind { kStore, kMount, kCluster };
  Kind kind = Kind::kCluster;
  std::string address;  // gRPC target: HOST:PORT of the master, or unix:SOCKET of a mount
  std::string shown;    // the master's HOST:PORT or the mountpoint, for messages and reports
  std::string ns;       // empty: the PATH named no namespace (a mount's root; report)
  std::string path;     // relative to the namespace root
  // A path in a cluster mount: the mount's --credentials folder (empty: it calls its master in
  // plain text), which the command uses when given none of its own.
  std::string mount_credentials;
  std::string mountpoint;  // the mount a path was in (also once kind is kCluster); else empty

  bool mount() const { return kind == Kind::kMount; }
  // "/ns/path" as the user reads it back.
  std::string Display() const;
};

// `path` may be empty (report): then only the cluster at `master` (or a mount, never) qualifies.
// Usage errors (no master, a URI where none is allowed) are kInvalidArgument.
Result<AdminTarget> ResolveAdminTarget(const std::string& path, const std::string& master);

// The Hello of the mount at `mountpoint` (its control socket, ControlSocketPath): its master (empty
// for a standalone mount) and root namespace. kUnavailable saying what to check when it does not
// answer within `timeout`.
Result<rpc::HelloResponse> MountHello(const std::string& mountpoint,
                                      std::chrono::milliseconds timeout);

}  // namespace lakecache::cli
