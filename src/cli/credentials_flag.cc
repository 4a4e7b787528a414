#include "cli/credentials_flag.h"

namespace lakecache::cli {

Result<std::shared_ptr<const security::ClusterCredentials>> OpenCredentials(
    const std::string& dir, security::Role as, const std::string& command) {
  if (dir.empty()) return std::shared_ptr<const security::ClusterCredentials>();
  return security::ClusterCredentials::Open(dir, as, command);
}

}  // namespace lakecache::cli
