// The mount command's side of building a mount: its flags and config turned into what
// mount/mount_assembly.h builds from (MountSources, MountSpec), checked before anything is
// mounted, and the mountpoint checks (an empty folder, no lakecache mount there already).
#pragma once

#include <string>

#include "cli/cli_context.h"
#include "cli/commands.h"
#include "cli/mount_options.h"
#include "common/metrics.h"
#include "common/result.h"
#include "mount/mount_assembly.h"

namespace lakecache::cli {

// Prints `message` as an error; the usage exit code.
int MountpointError(const std::string& message);

// kExitOk when `path` is an existing, empty folder with no lakecache mount on it (a dead one is
// cleared); else the exit code, the reason printed.
int CheckMountpoint(const std::string& path);

// The config, and the namespaces with their stores probed (or the cluster's, from its master);
// store metrics go to `registry` (may be null). A mistake here is reported before anything is
// mounted.
Result<MountSources> PrepareMount(const CliContext& ctx, const MountRequest& req,
                                  metrics::Registry* registry);

// The FUSE settings a mount of `req` runs with; a holder pins them.
FuseMountOptions FuseOptionsFor(const MountRequest& req, const MountOptions& options);

// How the stack of `req` is built (without its connection: the caller sets it).
MountSpec SpecFor(const MountRequest& req, const MountOptions& options);

}  // namespace lakecache::cli
