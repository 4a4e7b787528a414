// The CLI's commands. Each returns the process exit code (see cli_context.h) and writes its result
// to stdout, errors to stderr.
#pragma once

#include <string>

#include "cli/cli_context.h"
#include "common/cache_flags.h"

namespace lakecache::cli {

// Like `aws s3 ls`: one entry per line; folders end in '/'. Recursive lists every key under the
// URI.
int RunLs(const CliContext& ctx, const std::string& uri, bool recursive);

// Size, ETag and modification time of an object (or "directory" for a prefix).
int RunStat(const CliContext& ctx, const std::string& uri);

// Writes the object, or the inclusive byte range "A-B" / "A-", to stdout.
int RunCat(const CliContext& ctx, const std::string& uri, const std::string& range);

struct MountRequest {
  std::string
      uri;  // quick form: the one source, shown at the mountpoint's root; empty with --config
  std::string mountpoint;
  CacheFlags cache_flags;
  std::string read_ahead;     // --read-ahead SIZE; empty: the config's client.read_ahead_max
  std::string memory_budget;  // --memory-budget SIZE; empty: the config's client.memory_budget
  bool background = false;
};

// Mounts and serves until unmounted (foreground), or returns once the daemon's mount is ready.
int RunMount(const GlobalFlags& flags, const MountRequest& request);
int RunUmount(const std::string& mountpoint);
// Where a background mount logs when --log-file is not given.
std::string DefaultMountLogFile();

// Prints the effective config with secrets redacted.
int RunConfigShow(const CliContext& ctx);

}  // namespace lakecache::cli
