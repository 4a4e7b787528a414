// Result<T>: either a value of type T or a non-OK Status.
//
// Functions that produce a value and may fail return Result<T>; callers check ok() before value().
// Accessing value() of a failed Result is a bug and aborts. Not thread-safe beyond what T provides.
#pragma once

#include <cstdlib>
#include <optional>
#include <utility>

#include "common/status.h"

namespace lakecache {

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = Status::Internal("Result built from an OK status without a value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  // REQUIRES: ok()
  T& value() & {
    Check();
    return *value_;
  }
  const T& value() const& {
    Check();
    return *value_;
  }
  T&& value() && {
    Check();
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void Check() const {
    if (!value_) std::abort();
  }
  std::optional<T> value_;
  Status status_;
};

// Assigns the value of a Result expression to `lhs`, or returns its Status from the caller.
#define LC_CONCAT_INNER(a, b) a##b
#define LC_CONCAT(a, b) LC_CONCAT_INNER(a, b)
#define LC_ASSIGN_OR_RETURN(lhs, expr) \
  LC_ASSIGN_OR_RETURN_IMPL(LC_CONCAT(_res_, __LINE__), lhs, expr)
#define LC_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()

}  // namespace lakecache
