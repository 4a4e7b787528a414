// --credentials DIR (or LAKECACHE_CREDENTIALS) as every cluster command takes it: the cluster's
// folder opened for the role the command calls as (security/auth.h), or none without the flag.
#pragma once

#include <memory>
#include <string>

#include "common/result.h"
#include "security/auth.h"

namespace lakecache::cli {

// Null for an empty `dir` (a plain-text loopback cluster); an error names the missing file and
// `command` ("lakecache load").
Result<std::shared_ptr<const security::ClusterCredentials>> OpenCredentials(
    const std::string& dir, security::Role as, const std::string& command);

}  // namespace lakecache::cli
