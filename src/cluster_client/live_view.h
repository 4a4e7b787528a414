// LiveView: the cluster view a ClusterClient reads through. Refresh fetches the view from the
// master and installs a new ClientView (never an older epoch); readers share the installed one
// without a lock. The refresh interval and how long a failed worker stays marked down follow the
// cluster's heartbeat settings in the view. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>

#include "cluster_client/client_options.h"
#include "cluster_client/cluster_view.h"
#include "cluster_client/master_client.h"
#include "common/mutex.h"

namespace lakecache {

namespace rpc {
class ClientReport;
}  // namespace rpc

class LiveView {
 public:
  // `master` must outlive the view; `bulk_tls` as for BuildView.
  LiveView(MasterClient& master, ClusterClientOptions options,
           std::shared_ptr<const rpc::TlsContext> bulk_tls);
  ~LiveView();
  LiveView(const LiveView&) = delete;
  LiveView& operator=(const LiveView&) = delete;

  std::shared_ptr<const ClientView> Current() const EXCLUDES(view_mu_);
  // Fetches the view now. One refresh runs at a time, and a view older than the installed one (a
  // lower epoch) is not installed.
  Status Refresh() EXCLUDES(refresh_mu_, view_mu_, reporter_mu_);
  // Installs the last view fetched without the shared memory of workers that hung up: for when
  // the master does not answer.
  void DropClosedSessions() EXCLUDES(refresh_mu_, view_mu_);
  // Marks the worker of `peer` down for a heartbeat timeout (or until it restarts).
  void MarkDown(WorkerPeer& peer) const EXCLUDES(view_mu_);

  std::chrono::milliseconds refresh_interval() const EXCLUDES(view_mu_);
  // Steady-clock ms of the last view fetched (0: none yet).
  int64_t last_view_ms() const { return last_view_ms_.load(); }
  // Fills the report sent with every view fetch; see ClusterClient::SetReporter.
  void SetReporter(std::function<void(rpc::ClientReport*)> reporter) EXCLUDES(reporter_mu_);

 private:
  MasterClient& master_;
  const ClusterClientOptions options_;
  const std::shared_ptr<const rpc::TlsContext> bulk_tls_;

  // Held for a whole refresh: each builds on the installed view, so two at once would each open a
  // channel for a new worker and one would lose a down mark set meanwhile. Taken before view_mu_.
  Mutex refresh_mu_ ACQUIRED_BEFORE(view_mu_);
  Mutex reporter_mu_;
  std::function<void(rpc::ClientReport*)> reporter_ GUARDED_BY(reporter_mu_);
  mutable Mutex view_mu_;
  // Replaced whole on refresh, never changed once installed (readers share it without the lock).
  std::shared_ptr<const ClientView> view_ GUARDED_BY(view_mu_);
  // At least these; longer cluster settings (heartbeat interval and timeout) are followed. A
  // mount polls the master at most once a second, however often the workers heartbeat.
  static constexpr std::chrono::milliseconds kMinRefreshInterval{1000};
  static constexpr std::chrono::milliseconds kMinDownPeriod{5000};
  std::chrono::milliseconds refresh_interval_ GUARDED_BY(view_mu_){kMinRefreshInterval};
  std::chrono::milliseconds down_period_ GUARDED_BY(view_mu_){kMinDownPeriod};
  std::unique_ptr<rpc::ClusterView> last_got_ GUARDED_BY(refresh_mu_);  // the last view fetched
  std::atomic<int64_t> last_view_ms_{0};
};

}  // namespace lakecache
