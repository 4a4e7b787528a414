// The cluster mounts that reported with their last view fetches (rpc::ClientReport): how much
// their readers read and from where, for the status page. A mount that stops reporting (gone, or
// reading through its last view while the master was away) leaves after `expiry`. Thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "rpc/lakecache.pb.h"

namespace lakecache {

class ClientTable {
 public:
  explicit ClientTable(std::chrono::milliseconds expiry) : expiry_(expiry) {}

  // Keeps `report` (one without an id is ignored).
  void Note(const rpc::ClientReport& report);
  // The reports of the mounts heard from within `expiry`, by id.
  std::vector<rpc::ClientReport> Live() const;

 private:
  struct Entry {
    rpc::ClientReport report;
    std::chrono::steady_clock::time_point at;
  };
  const std::chrono::milliseconds expiry_;
  mutable Mutex mu_;
  mutable std::map<std::string, Entry> clients_ GUARDED_BY(mu_);
};

}  // namespace lakecache
