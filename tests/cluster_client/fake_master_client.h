// FakeMasterClient: a MasterClient for tests of ClusterClient without a master. Each View call
// answers the next view of its script (the last one again once it runs out, or a set error);
// listings come from what the test puts in; there are no namespaces, stats or notes to keep.
// Thread-safe.
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cluster_client/master_client.h"
#include "common/mutex.h"
#include "rpc/lakecache.pb.h"

namespace lakecache::testing {

class FakeMasterClient final : public MasterClient {
 public:
  // A view of `epoch` whose workers are (id, address) pairs, each of 1 GiB, up since start 1.
  static rpc::ClusterView MakeView(uint64_t epoch,
                                   const std::vector<std::pair<std::string, std::string>>& workers,
                                   uint32_t heartbeat_interval_ms = 3600 * 1000) {
    rpc::ClusterView view;
    view.set_epoch(epoch);
    view.set_heartbeat_interval_ms(heartbeat_interval_ms);
    view.set_heartbeat_timeout_ms(2 * heartbeat_interval_ms);
    for (const auto& [id, address] : workers) {
      rpc::WorkerInfo* w = view.add_workers();
      w->set_id(id);
      w->set_address(address);
      w->set_start_time_ms(1);
      w->set_capacity_bytes(1ull << 30);
    }
    return view;
  }

  void AddView(rpc::ClusterView view) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    views_.push_back(std::move(view));
  }
  // Every View call fails with `status` until it is OK again.
  void FailViews(Status status) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    view_error_ = std::move(status);
  }
  void AddListing(const std::string& ns, const std::string& dir, ClusterListing listing)
      EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    listings_[ns + "/" + dir] = std::move(listing);
  }
  size_t view_calls() EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return view_calls_;
  }

  Result<std::vector<ClusterNamespace>> Namespaces() override {
    return std::vector<ClusterNamespace>{};
  }
  Result<rpc::ClusterView> View(const rpc::ClusterViewRequest&) override EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    ++view_calls_;
    if (!view_error_.ok()) return view_error_;
    if (!views_.empty()) {
      last_ = std::move(views_.front());
      views_.pop_front();
    } else if (!last_.has_value()) {
      return Status::Unavailable("the fake master has no view");
    }
    return *last_;
  }
  // The whole folder in one page.
  Result<ClusterListing> ListDir(const std::string& ns, const std::string& dir, const ListDirPage&,
                                 Clock::time_point, bool) override EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    auto it = listings_.find(ns + "/" + dir);
    if (it == listings_.end()) return ClusterListing{};
    return it->second;
  }
  Result<ClusterStat> Stat(const std::string& ns, const std::string& path,
                           Clock::time_point) override {
    return Status::NotFound("/" + ns + "/" + path + ": the fake master knows no paths");
  }
  Status NoteWrite(const rpc::NoteWriteRequest&, Clock::time_point) override {
    return Status::Ok();
  }

 private:
  Mutex mu_;
  std::deque<rpc::ClusterView> views_ GUARDED_BY(mu_);    // not answered yet
  std::optional<rpc::ClusterView> last_ GUARDED_BY(mu_);  // the last answered
  Status view_error_ GUARDED_BY(mu_);
  size_t view_calls_ GUARDED_BY(mu_) = 0;
  std::map<std::string, ClusterListing> listings_ GUARDED_BY(mu_);
};

}  // namespace lakecache::testing
