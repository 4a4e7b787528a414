#include "ufs/fault_injecting_store.h"

#include <utility>

namespace lakecache {

FaultInjectingStore::FaultInjectingStore(std::shared_ptr<ObjectStore> inner)
    : ObjectStoreWrapper(std::move(inner)) {}

Result<ListPage> FaultInjectingStore::List(const ListRequest& request, const IoOptions& options) {
  LC_RETURN_IF_ERROR(Intercept(StoreOp::kList, request.prefix).status);
  return inner().List(request, options);
}

Result<ObjectInfo> FaultInjectingStore::Head(std::string_view key, const IoOptions& options) {
  LC_RETURN_IF_ERROR(Intercept(StoreOp::kHead, key).status);
  return inner().Head(key, options);
}

Result<ReadReply> FaultInjectingStore::ReadRaw(std::string_view key, uint64_t offset,
                                               std::span<const std::span<char>> bufs,
                                               const ReadOptions& options) {
  FaultRule rule = Intercept(StoreOp::kRead, key);
  LC_RETURN_IF_ERROR(rule.status);
  LC_ASSIGN_OR_RETURN(ReadReply reply, inner().ReadRaw(key, offset, bufs, options));
  if (rule.reply_etag) reply.etag = *rule.reply_etag;
  if (rule.reply_object_size) reply.object_size = *rule.reply_object_size;
  return reply;
}

Result<ObjectInfo> FaultInjectingStore::Put(std::string_view key, std::span<const char> data,
                                            const PutOptions& options) {
  return Run(StoreOp::kPut, key, 0, [&] { return inner().Put(key, data, options); });
}

Status FaultInjectingStore::Delete(std::string_view key, const IoOptions& options) {
  return Run(StoreOp::kDelete, key, 0, [&] { return inner().Delete(key, options); });
}

Result<ObjectInfo> FaultInjectingStore::Copy(std::string_view from_key, std::string_view to_key,
                                             const IoOptions& options) {
  return Run(StoreOp::kCopy, to_key, 0, [&] { return inner().Copy(from_key, to_key, options); });
}

Result<std::string> FaultInjectingStore::CreateMultipartUpload(std::string_view key,
                                                               const IoOptions& options) {
  return Run(StoreOp::kCreateUpload, key, 0,
             [&] { return inner().CreateMultipartUpload(key, options); });
}

Result<std::string> FaultInjectingStore::UploadPart(std::string_view key,
                                                    std::string_view upload_id, int part_number,
                                                    std::span<const char> data,
                                                    const IoOptions& options) {
  return Run(StoreOp::kUploadPart, key, part_number,
             [&] { return inner().UploadPart(key, upload_id, part_number, data, options); });
}

Result<ObjectInfo> FaultInjectingStore::CompleteMultipartUpload(
    std::string_view key, std::string_view upload_id, const std::vector<CompletedPart>& parts,
    const IoOptions& options) {
  return Run(StoreOp::kCompleteUpload, key, 0,
             [&] { return inner().CompleteMultipartUpload(key, upload_id, parts, options); });
}

Status FaultInjectingStore::AbortMultipartUpload(std::string_view key, std::string_view upload_id,
                                                 const IoOptions& options) {
  return Run(StoreOp::kAbortUpload, key, 0,
             [&] { return inner().AbortMultipartUpload(key, upload_id, options); });
}

Result<std::vector<PendingUpload>> FaultInjectingStore::ListMultipartUploads(
    std::string_view prefix, const IoOptions& options) {
  return Run(StoreOp::kListUploads, prefix, 0,
             [&] { return inner().ListMultipartUploads(prefix, options); });
}

void FaultInjectingStore::AddRule(FaultRule rule) {
  MutexLock lock(&mu_);
  rules_.push_back(std::move(rule));
}

void FaultInjectingStore::FailNext(StoreOp op, Status status, int times, std::string key_contains) {
  FaultRule rule;
  rule.op = op;
  rule.key_contains = std::move(key_contains);
  rule.status = std::move(status);
  rule.times = times;
  AddRule(std::move(rule));
}

void FaultInjectingStore::FailAlways(StoreOp op, Status status, std::string key_contains) {
  FailNext(op, std::move(status), FaultRule::kForever, std::move(key_contains));
}

void FaultInjectingStore::ReplyWithVersion(std::string etag, std::optional<uint64_t> object_size,
                                           int times, std::string key_contains) {
  FaultRule rule;
  rule.op = StoreOp::kRead;
  rule.key_contains = std::move(key_contains);
  rule.times = times;
  rule.reply_etag = std::move(etag);
  rule.reply_object_size = object_size;
  AddRule(std::move(rule));
}

void FaultInjectingStore::ClearRules() {
  MutexLock lock(&mu_);
  rules_.clear();
}

void FaultInjectingStore::EndDelays() {
  {
    MutexLock lock(&mu_);
    ++delays_ended_;
    for (FaultRule& rule : rules_) rule.delay = Clock::duration::zero();
  }
  delays_ended_cv_.SignalAll();
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

FaultRule FaultInjectingStore::Intercept(StoreOp op, std::string_view key, int part_number) {
  calls_[static_cast<size_t>(op)].fetch_add(1);
  FaultRule applied;
  MutexLock lock(&mu_);
  for (FaultRule& rule : rules_) {
    if (rule.times == 0 || (rule.op != StoreOp::kAny && rule.op != op)) continue;
    if (key.find(rule.key_contains) == std::string_view::npos) continue;
    if (rule.part_number != 0 && rule.part_number != part_number) continue;
    if (rule.times > 0) --rule.times;
    applied = rule;
    break;
  }
  // The wait releases the lock, so that a stalled call does not stall the others.
  const Clock::time_point until = Clock::now() + applied.delay;
  const uint64_t ended = delays_ended_;
  while (delays_ended_ == ended && Clock::now() < until) delays_ended_cv_.WaitUntil(&mu_, until);
  return applied;
}

}  // namespace lakecache
