#include "ufs/retrying_store.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "ufs/content_md5.h"

namespace lakecache {
namespace {

RetryPolicy WithDefaults(RetryPolicy policy) {
  policy.max_attempts = std::max(1, policy.max_attempts);
  if (policy.clock == nullptr) policy.clock = SteadyClock::Real();
  return policy;
}

uint64_t SeedOf(const RetryPolicy& policy) {
  return policy.seed != 0 ? policy.seed : std::random_device{}();
}

// Moves a successful result into `out` so that Retry can deal in plain Status.
template <typename T>
Status Keep(Result<T> result, std::optional<T>* out) {
  if (!result.ok()) return result.status();
  *out = std::move(result).value();
  return Status::Ok();
}

}  // namespace

RetryingStore::RetryingStore(std::shared_ptr<ObjectStore> inner, RetryPolicy policy)
    : ObjectStoreWrapper(std::move(inner)),
      policy_(WithDefaults(std::move(policy))),
      rng_(SeedOf(policy_)) {}

Result<ListPage> RetryingStore::List(const ListRequest& request, const IoOptions& options) {
  std::optional<ListPage> page;
  LC_RETURN_IF_ERROR(Retry("List", request.prefix, options,
                           [&] { return Keep(inner().List(request, options), &page); }));
  return std::move(*page);
}

Result<ObjectInfo> RetryingStore::Head(std::string_view key, const IoOptions& options) {
  std::optional<ObjectInfo> info;
  LC_RETURN_IF_ERROR(
      Retry("Head", key, options, [&] { return Keep(inner().Head(key, options), &info); }));
  return std::move(*info);
}

Result<ReadReply> RetryingStore::ReadRaw(std::string_view key, uint64_t offset,
                                         std::span<const std::span<char>> bufs,
                                         const ReadOptions& options) {
  std::optional<ReadReply> reply;
  LC_RETURN_IF_ERROR(Retry("Read", key, options, [&] {
    return Keep(inner().ReadRaw(key, offset, bufs, options), &reply);
  }));
  return std::move(*reply);
}

Result<ObjectInfo> RetryingStore::Put(std::string_view key, std::span<const char> data,
                                      const PutOptions& options) {
  std::optional<ObjectInfo> info;
  int attempts = 0;
  LC_RETURN_IF_ERROR(Retry("Put", key, options, [&] {
    auto put = inner().Put(key, data, options);
    // A create-only repeat finds the key taken, maybe by its own first attempt.
    if (++attempts > 1 && options.if_none_match &&
        put.status().code() == StatusCode::kPreconditionFailed) {
      put = AcceptIfWritten(key, put.status(), options, [&](const ObjectInfo& o) {
        return o.size == data.size() && o.etag == Md5Hex(data);
      });
    }
    return Keep(std::move(put), &info);
  }));
  return std::move(*info);
}

Status RetryingStore::Delete(std::string_view key, const IoOptions& options) {
  return Retry("Delete", key, options, [&] { return inner().Delete(key, options); });
}

Result<ObjectInfo> RetryingStore::Copy(std::string_view from_key, std::string_view to_key,
                                       const IoOptions& options) {
  std::optional<ObjectInfo> info;
  LC_RETURN_IF_ERROR(Retry("Copy", to_key, options,
                           [&] { return Keep(inner().Copy(from_key, to_key, options), &info); }));
  return std::move(*info);
}

Result<std::string> RetryingStore::CreateMultipartUpload(std::string_view key,
                                                         const IoOptions& options) {
  std::optional<std::string> id;
  LC_RETURN_IF_ERROR(Retry("CreateMultipartUpload", key, options,
                           [&] { return Keep(inner().CreateMultipartUpload(key, options), &id); }));
  return std::move(*id);
}

Result<std::string> RetryingStore::UploadPart(std::string_view key, std::string_view upload_id,
                                              int part_number, std::span<const char> data,
                                              const IoOptions& options) {
  std::optional<std::string> etag;
  LC_RETURN_IF_ERROR(Retry("UploadPart", key, options, [&] {
    return Keep(inner().UploadPart(key, upload_id, part_number, data, options), &etag);
  }));
  return std::move(*etag);
}

Result<ObjectInfo> RetryingStore::CompleteMultipartUpload(std::string_view key,
                                                          std::string_view upload_id,
                                                          const std::vector<CompletedPart>& parts,
                                                          const IoOptions& options) {
  std::optional<ObjectInfo> info;
  int attempts = 0;
  LC_RETURN_IF_ERROR(Retry("CompleteMultipartUpload", key, options, [&] {
    auto done = inner().CompleteMultipartUpload(key, upload_id, parts, options);
    // A repeat finds the upload gone, maybe completed by its own first attempt.
    if (++attempts > 1 && done.status().code() == StatusCode::kNotFound) {
      done = AcceptIfWritten(key, done.status(), options,
                             [&](const ObjectInfo& o) { return IsObjectOfUpload(o, parts); });
    }
    return Keep(std::move(done), &info);
  }));
  return std::move(*info);
}

Status RetryingStore::AbortMultipartUpload(std::string_view key, std::string_view upload_id,
                                           const IoOptions& options) {
  return Retry("AbortMultipartUpload", key, options,
               [&] { return inner().AbortMultipartUpload(key, upload_id, options); });
}

Result<std::vector<PendingUpload>> RetryingStore::ListMultipartUploads(std::string_view prefix,
                                                                       const IoOptions& options) {
  std::optional<std::vector<PendingUpload>> uploads;
  LC_RETURN_IF_ERROR(Retry("ListMultipartUploads", prefix, options, [&] {
    return Keep(inner().ListMultipartUploads(prefix, options), &uploads);
  }));
  return std::move(*uploads);
}

Result<ObjectInfo> RetryingStore::AcceptIfWritten(
    std::string_view key, const Status& status, const IoOptions& options,
    const std::function<bool(const ObjectInfo&)>& made) {
  auto object = inner().Head(key, options);
  if (object.ok() && made(*object)) {
    spdlog::info("{}: a repeated write found its own earlier attempt done ({})", Target(key),
                 status.ToString());
    return object;
  }
  return status.WithContext("repeated after a failure, and the key holds no object it made");
}

Status RetryingStore::Retry(std::string_view op, std::string_view key, const IoOptions& options,
                            const std::function<Status()>& attempt) {
  for (int n = 1;; ++n) {
    Status st = attempt();
    if (st.ok() || !st.retryable()) return st;
    if (n >= policy_.max_attempts) {
      if (n == 1) return st;  // nothing was retried
      return Status(st.code(), fmt::format("{} (after {} attempts)", st.message(), n));
    }
    Clock::duration wait = Backoff(n);
    // A retry that could only start at or after the deadline is pointless: give up now.
    if (policy_.clock->Now() + wait >= options.deadline) {
      return Status::DeadlineExceeded(fmt::format(
          "{}: deadline reached after {} attempts; last error: {}", Target(key), n, st.ToString()));
    }
    spdlog::debug("{} {}: attempt {} of {} failed, retrying in {}ms: {}", op, Target(key), n,
                  policy_.max_attempts,
                  std::chrono::duration_cast<std::chrono::milliseconds>(wait).count(),
                  st.ToString());
    policy_.clock->SleepFor(wait);
  }
}

Clock::duration RetryingStore::Backoff(int retry) {
  // In floating point: initial * multiplier^k overflows integer ticks long before the cap matters.
  double cap = static_cast<double>(policy_.max_backoff.count());
  double base = static_cast<double>(policy_.initial_backoff.count()) *
                std::pow(policy_.multiplier, retry - 1);
  auto ticks = static_cast<Clock::rep>(std::max(0.0, std::min(base, cap)));
  if (!policy_.jitter) return Clock::duration(ticks);
  std::uniform_int_distribution<Clock::rep> dist(0, ticks);
  MutexLock lock(&rng_mu_);
  return Clock::duration(dist(rng_));
}

}  // namespace lakecache
