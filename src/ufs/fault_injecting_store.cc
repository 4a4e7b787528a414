#include "ufs/fault_injecting_store.h"

#include <thread>
#include <utility>

namespace lakecache {

FaultInjectingStore::FaultInjectingStore(std::shared_ptr<ObjectStore> inner)
    : inner_(std::move(inner)) {}

Result<ListPage> FaultInjectingStore::List(const ListRequest& request, const IoOptions& options) {
  LC_RETURN_IF_ERROR(Intercept(StoreOp::kList, request.prefix));
  return inner_->List(request, options);
}

Result<ObjectInfo> FaultInjectingStore::Head(std::string_view key, const IoOptions& options) {
  LC_RETURN_IF_ERROR(Intercept(StoreOp::kHead, key));
  return inner_->Head(key, options);
}

Result<size_t> FaultInjectingStore::Read(std::string_view key, uint64_t offset, std::span<char> buf,
                                         const ReadOptions& options) {
  LC_RETURN_IF_ERROR(Intercept(StoreOp::kRead, key));
  return inner_->Read(key, offset, buf, options);
}

Result<size_t> FaultInjectingStore::ReadV(std::string_view key, uint64_t offset,
                                          std::span<const std::span<char>> bufs,
                                          const ReadOptions& options) {
  LC_RETURN_IF_ERROR(Intercept(StoreOp::kRead, key));
  return inner_->ReadV(key, offset, bufs, options);
}

Status FaultInjectingStore::Put(std::string_view key, std::span<const char> data,
                                const IoOptions& options) {
  LC_RETURN_IF_ERROR(Intercept(StoreOp::kPut, key));
  return inner_->Put(key, data, options);
}

Status FaultInjectingStore::Delete(std::string_view key, const IoOptions& options) {
  LC_RETURN_IF_ERROR(Intercept(StoreOp::kDelete, key));
  return inner_->Delete(key, options);
}

void FaultInjectingStore::AddRule(FaultRule rule) {
  MutexLock lock(&mu_);
  rules_.push_back(std::move(rule));
}

void FaultInjectingStore::FailNext(StoreOp op, Status status, int times, std::string key_contains) {
  AddRule({op, std::move(key_contains), std::move(status), times, {}});
}

void FaultInjectingStore::FailAlways(StoreOp op, Status status, std::string key_contains) {
  AddRule({op, std::move(key_contains), std::move(status), FaultRule::kForever, {}});
}

void FaultInjectingStore::ClearRules() {
  MutexLock lock(&mu_);
  rules_.clear();
}

int64_t FaultInjectingStore::Calls(StoreOp op) const {
  if (op != StoreOp::kAny) return calls_[static_cast<size_t>(op)].load();
  int64_t total = 0;
  for (const auto& c : calls_) total += c.load();
  return total;
}

void FaultInjectingStore::ResetCalls() {
  for (auto& c : calls_) c.store(0);
}

Status FaultInjectingStore::ServerError(std::string_view key) const {
  return Status::Unavailable(Target(key) + ": HTTP 503 SlowDown: Please reduce your request rate");
}

Status FaultInjectingStore::AccessDenied(std::string_view key) const {
  return Status::AccessDenied(Target(key) +
                              ": access denied (HTTP 403 AccessDenied: Access Denied)");
}

Status FaultInjectingStore::NotFound(std::string_view key) const {
  return Status::NotFound(Target(key) +
                          ": not found (HTTP 404 NoSuchKey: The specified key does not exist.)");
}

Status FaultInjectingStore::ConnectionReset(std::string_view key) const {
  return Status::Unavailable(Target(key) + ": Recv failure: Connection reset by peer");
}

Status FaultInjectingStore::Intercept(StoreOp op, std::string_view key) {
  calls_[static_cast<size_t>(op)].fetch_add(1);
  Status status;
  Clock::duration delay{0};
  {
    MutexLock lock(&mu_);
    for (FaultRule& rule : rules_) {
      if (rule.times == 0 || (rule.op != StoreOp::kAny && rule.op != op)) continue;
      if (key.find(rule.key_contains) == std::string_view::npos) continue;
      if (rule.times > 0) --rule.times;
      status = rule.status;
      delay = rule.delay;
      break;
    }
  }
  // Outside the lock, so that a stalled call does not stall the others.
  if (delay > Clock::duration::zero()) std::this_thread::sleep_for(delay);
  return status;
}

}  // namespace lakecache
