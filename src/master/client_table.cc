#include "master/client_table.h"

namespace lakecache {

namespace {
constexpr size_t kMaxClients = 10000;  // a bound on what callers can make the master keep
}  // namespace

void ClientTable::Note(const rpc::ClientReport& report) {
  // Bounded, whoever sends it: an id of at most 64 bytes, names of at most 4 KiB.
  if (report.id().empty() || report.id().size() > 64 || report.host().size() > 4096 ||
      report.mountpoint().size() > 4096) {
    return;
  }
  MutexLock lock(&mu_);
  if (clients_.size() >= kMaxClients && !clients_.contains(report.id())) return;
  clients_[report.id()] = Entry{report, std::chrono::steady_clock::now()};
}

std::vector<rpc::ClientReport> ClientTable::Live() const {
  auto oldest = std::chrono::steady_clock::now() - expiry_;
  std::vector<rpc::ClientReport> out;
  MutexLock lock(&mu_);
  for (auto it = clients_.begin(); it != clients_.end();) {
    if (it->second.at < oldest) {
      it = clients_.erase(it);
      continue;
    }
    out.push_back(it->second.report);
    ++it;
  }
  return out;
}

}  // namespace lakecache
