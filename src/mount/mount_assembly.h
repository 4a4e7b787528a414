// A mount's stack, built from what it was asked for without the CLI (a test builds one the same
// way): the block store (the cluster's, or a local one), the FileSystem over the namespaces, the
// FUSE session on its connection (the holder's, an inherited descriptor, or a mount of its own),
// the control socket and the metrics collector. The CLI turns flags into a MountSources and a
// MountSpec, and adds what only a process has (the /metrics endpoint, stdio, the log).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache/block_store.h"
#include "cluster_client/cluster_client.h"
#include "common/config.h"
#include "common/metrics.h"
#include "common/result.h"
#include "fs/file_system.h"
#include "fuse/fuse_mount.h"
#include "fuse/held_connection.h"
#include "meta/namespace_table.h"
#include "mount/holder_link.h"
#include "mount/mount_admin.h"
#include "native/native_server.h"
#include "ufs/retrying_store.h"

namespace lakecache {

// What a mount serves, gathered before it touches its FUSE connection (a mistake here is reported
// before anything is mounted): the config, and the namespaces with their stores probed, or the
// cluster's namespaces through `client`.
struct MountSources {
  bool cluster = false;
  Config config;
  std::unique_ptr<NamespaceTable> namespaces;
  std::shared_ptr<ClusterClient> client;  // cluster mode
};

// How the stack is built over its sources.
struct MountSpec {
  std::string mountpoint;
  bool single_namespace_root = false;  // the quick form: the one namespace at the root
  std::string master;                  // cluster mode: HOST:PORT, for the control socket
  std::string credentials;             // cluster mode: the credentials folder (as given)
  std::vector<uint32_t> allow_uids;    // control socket users, besides client.allow_uids
  FileSystemOptions fs;                // owner, modes, read_only (the mount options)
  FuseMountOptions fuse;               // fs_name and the FUSE mount options
  // Writes: a file of up to this many bytes staged on disk is sent as one Put at close instead of
  // streamed in parts (an experiment, docs/benchmarks.md "Writes"; 0: off); and the parts per
  // size step of a streamed upload (0: the default; tests of part growth use a few).
  uint64_t single_put_max = 0;
  uint32_t upload_parts_per_step = 0;
  // The connection: the holder's (`link`, which must outlive the stack), else the inherited
  // descriptor `fuse_fd` with the INIT saved in `fuse_init`, else a mount of its own.
  HolderLink* link = nullptr;
  int fuse_fd = -1;
  std::string fuse_init;
  int state_fd = -1;  // without a link: the held MountJournal, or -1
};

struct AssembledMount {
  std::unique_ptr<metrics::Registry> metrics;  // null without metrics; destroyed last
  std::unique_ptr<FuseMount> mount;
  std::shared_ptr<BlockStore> blocks;
  std::unique_ptr<MountAdmin> admin;     // the control socket; null when it could not listen
  std::unique_ptr<NativeServer> native;  // the native data path; null when off or not listening
  metrics::Registry::Registration collector;
};

// Builds the stack over `sources` and takes its FUSE connection (mounted, adopted or handed over
// by the holder); Run of `mount` then serves it. `registry` may be null (no metrics).
Result<AssembledMount> AssembleMount(MountSources sources, const MountSpec& spec,
                                     std::unique_ptr<metrics::Registry> registry);

// Serves until unmounted (or stopped for a successor), calls `after_run`, then the collector and
// the control socket go (none is left behind) and the cache's figures go to the log.
Status ServeMount(AssembledMount& mounted, const std::function<void()>& after_run = nullptr);

// True when a mount of `sources` is mounted "rw": not `read_only`, and it has the control folder,
// whose file any reader writes (the FileSystem refuses every other change where nothing writes,
// with EROFS), or a namespace that writes (the FileSystem decides the same from the same inputs).
bool MountWrites(const MountSources& sources, bool read_only);

// A mount serves long-running jobs: it rides out an outage of several seconds (a store, master or
// worker restart) rather than failing the read, at the price of reporting a dead store more slowly.
RetryPolicy MountRetryPolicy();

// Every namespace of the cluster `client` is connected to (the master at `master`), each read
// through the workers.
Result<std::unique_ptr<NamespaceTable>> ClusterNamespaceTable(
    const std::shared_ptr<ClusterClient>& client, const std::string& master);

// A holder's MountConnection: a libfuse mount (fuse/fuse_connection.h).
Result<std::unique_ptr<HeldConnection>> MountHeldConnection(const std::string& mountpoint,
                                                            const std::string& options,
                                                            int descriptors);

}  // namespace lakecache
