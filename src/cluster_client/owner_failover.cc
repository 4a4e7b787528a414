#include "cluster_client/owner_failover.h"

#include <spdlog/spdlog.h>

namespace lakecache {

Status OwnerFailover::NoWorkers(OwnerCall call, const std::string& what) const {
  return Status::Unavailable("no workers in the cluster (master " + master_ + ") to " + call.verb +
                             " " + what);
}

Status OwnerFailover::DeadlinePassed(OwnerCall call, const std::string& what, const Status& last) {
  return Status::DeadlineExceeded(std::string(call.gerund) + " " + what +
                                  ": the deadline passed; last: " + last.message());
}

Status OwnerFailover::EveryWorkerFailed(OwnerCall call, const std::string& what,
                                        const Status& last) {
  return Status::Unavailable("every worker failed " + std::string(call.gerund) + " " + what +
                             "; last: " + last.message());
}

void OwnerFailover::Failed(const ViewWorker& worker, OwnerCall call, const std::string& what,
                           const Status& s) {
  spdlog::warn("worker {} at {} failed {} {}: {}; trying the next worker", worker.id,
               worker.address, call.gerund, what, s.message());
}

}  // namespace lakecache
