#include "ufs/retrying_store.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace lakecache {
namespace {

RetryPolicy WithDefaults(RetryPolicy policy) {
  policy.max_attempts = std::max(1, policy.max_attempts);
  if (!policy.sleep) policy.sleep = [](Clock::duration d) { std::this_thread::sleep_for(d); };
  if (!policy.now) policy.now = [] { return Clock::now(); };
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

Status RetryingStore::Put(std::string_view key, std::span<const char> data,
                          const IoOptions& options) {
  return Retry("Put", key, options, [&] { return inner().Put(key, data, options); });
}

Status RetryingStore::Delete(std::string_view key, const IoOptions& options) {
  return Retry("Delete", key, options, [&] { return inner().Delete(key, options); });
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
    if (policy_.now() + wait >= options.deadline) {
      return Status::DeadlineExceeded(fmt::format(
          "{}: deadline reached after {} attempts; last error: {}", Target(key), n, st.ToString()));
    }
    spdlog::debug("{} {}: attempt {} of {} failed, retrying in {}ms: {}", op, Target(key), n,
                  policy_.max_attempts,
                  std::chrono::duration_cast<std::chrono::milliseconds>(wait).count(),
                  st.ToString());
    policy_.sleep(wait);
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
