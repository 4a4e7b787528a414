#include "cli/credentials_flag.h"

namespace lakecache::cli {

Result<std::shared_ptr<const rpc::ClusterCredentials>> OpenCredentials(const std::string& dir,
                                                                       rpc::Role as,
                                                                       const std::string& command) {
  if (dir.empty()) return std::shared_ptr<const rpc::ClusterCredentials>();
  return rpc::ClusterCredentials::Open(dir, as, command);
}

}  // namespace lakecache::cli
