#include "cluster_client/live_view.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "cluster_client/node_memory.h"
#include "rpc/lakecache.pb.h"

namespace lakecache {

LiveView::LiveView(MasterClient& master, ClusterClientOptions options,
                   std::shared_ptr<const rpc::TlsContext> bulk_tls)
    : master_(master),
      options_(std::move(options)),
      bulk_tls_(std::move(bulk_tls)),
      view_(std::make_shared<ClientView>()) {}

LiveView::~LiveView() = default;

std::shared_ptr<const ClientView> LiveView::Current() const {
  MutexLock lock(&view_mu_);
  return view_;
}

std::chrono::milliseconds LiveView::refresh_interval() const {
  MutexLock lock(&view_mu_);
  return refresh_interval_;
}

Status LiveView::Refresh() {
  MutexLock refreshing(&refresh_mu_);
  rpc::ClusterViewRequest request;
  {
    MutexLock lock(&reporter_mu_);
    if (reporter_) reporter_(request.mutable_client());
  }
  LC_ASSIGN_OR_RETURN(rpc::ClusterView got, master_.View(request));
  last_view_ms_ = SteadyNowMs();
  std::shared_ptr<const ClientView> view = BuildView(got, *Current(), options_, bulk_tls_);
  const uint32_t heartbeat_interval_ms = got.heartbeat_interval_ms();
  const uint32_t heartbeat_timeout_ms = got.heartbeat_timeout_ms();
  last_got_ = std::make_unique<rpc::ClusterView>(std::move(got));
  MutexLock lock(&view_mu_);
  if (view->epoch < view_->epoch) {  // an answer older than what is installed
    spdlog::debug("ignoring cluster view epoch {}: epoch {} is installed", view->epoch,
                  view_->epoch);
    return Status::Ok();
  }
  refresh_interval_ =
      std::max(kMinRefreshInterval, std::chrono::milliseconds(heartbeat_interval_ms));
  down_period_ = std::max(kMinDownPeriod, std::chrono::milliseconds(heartbeat_timeout_ms));
  if (view->epoch != view_->epoch) {
    spdlog::info("cluster view epoch {}: {} workers", view->epoch, view->workers.size());
  }
  view_ = std::move(view);
  return Status::Ok();
}

void LiveView::DropClosedSessions() {
  MutexLock refreshing(&refresh_mu_);
  if (last_got_ == nullptr) return;
  std::shared_ptr<const ClientView> current = Current();
  if (!SomeNodeSessionClosed(*current)) return;
  std::shared_ptr<const ClientView> view = BuildView(*last_got_, *current, options_, bulk_tls_);
  MutexLock lock(&view_mu_);
  if (view->epoch >= view_->epoch) view_ = std::move(view);
}

void LiveView::MarkDown(WorkerPeer& peer) const {
  std::chrono::milliseconds period;
  {
    MutexLock lock(&view_mu_);
    period = down_period_;
  }
  peer.down_until_ms.store(SteadyNowMs() + period.count(), std::memory_order_relaxed);
}

void LiveView::SetReporter(std::function<void(rpc::ClientReport*)> reporter) {
  MutexLock lock(&reporter_mu_);
  reporter_ = std::move(reporter);
}

}  // namespace lakecache
