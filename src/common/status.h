// Status: the outcome of an operation, a code plus a human-readable message.
//
// One error type serves every layer. Codes are grouped by what the caller can do about them: retry
// (kUnavailable), give up with a clear message (kNotFound, kAccessDenied, ...), or report a bug
// (kInternal). What a failure means is decided once, by the code set where the error is born (the
// store client, the gRPC mapping): retryable() and peer_failed() below; callers never re-decide it.
// Messages name the object involved (bucket, key, file, config key) and never contain secrets.
// Status is a value type; copying is cheap (OK carries no allocation).
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace lakecache {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,     // bad input from the caller: malformed config, bad URI, bad range
  kNotFound,            // object, file or namespace does not exist
  kAccessDenied,        // credentials rejected or missing permission
  kUnavailable,         // transient: 5xx, SlowDown, timeout, connection reset; worth retrying
  kDeadlineExceeded,    // the caller's deadline passed (retries included)
  kIoError,             // local I/O failure
  kNoSpace,             // disk full or a capacity floor reached
  kCorruption,          // checksum or format mismatch
  kPreconditionFailed,  // the object changed (If-Match failed)
  kUnimplemented,
  kInternal,         // a bug or an unexpected answer (e.g. unparsable XML from the server)
  kUnauthenticated,  // a call without valid credentials (no token, or not one of the cluster's)
  // The file system refuses the call as the contract says (a write it does not allow, a flag not
  // set): the Status carries the errno the caller gets (Status::posix_errno).
  kRefused,
};

std::string_view StatusCodeName(StatusCode code);
// What a code means to the caller: see Status::retryable and Status::peer_failed.
bool IsRetryable(StatusCode code);
bool IsPeerFailure(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) {
    return {StatusCode::kInvalidArgument, std::move(msg)};
  }
  static Status NotFound(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
  static Status AccessDenied(std::string msg) {
    return {StatusCode::kAccessDenied, std::move(msg)};
  }
  static Status Unavailable(std::string msg) { return {StatusCode::kUnavailable, std::move(msg)}; }
  static Status DeadlineExceeded(std::string msg) {
    return {StatusCode::kDeadlineExceeded, std::move(msg)};
  }
  static Status IoError(std::string msg) { return {StatusCode::kIoError, std::move(msg)}; }
  // "WHAT: <strerror(errno)>" for a system call that has just failed (errno is read here).
  static Status IoErrorFromErrno(const std::string& what);
  static Status NoSpace(std::string msg) { return {StatusCode::kNoSpace, std::move(msg)}; }
  static Status Corruption(std::string msg) { return {StatusCode::kCorruption, std::move(msg)}; }
  static Status PreconditionFailed(std::string msg) {
    return {StatusCode::kPreconditionFailed, std::move(msg)};
  }
  static Status Unimplemented(std::string msg) {
    return {StatusCode::kUnimplemented, std::move(msg)};
  }
  static Status Internal(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }
  static Status Unauthenticated(std::string msg) {
    return {StatusCode::kUnauthenticated, std::move(msg)};
  }
  // REQUIRES: posix_errno > 0 (EPERM, EROFS, EINVAL, ...).
  static Status Refused(int posix_errno, std::string msg);

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  const std::string& message() const;
  // The errno of a kRefused status; 0 for every other.
  int posix_errno() const { return state_ ? state_->posix_errno : 0; }
  // True when repeating the same request may succeed (transient server or network trouble).
  bool retryable() const { return IsRetryable(code()); }
  // True when the one asked (an object store, a worker, the master) failed to answer: it or the
  // path to it is down or too slow, or its answer broke or could not be read. Another replica may
  // answer, and a cached answer may be served meanwhile. False for answers about the request
  // itself (not found, access denied, the object changed, ...): every replica gives the same.
  bool peer_failed() const { return IsPeerFailure(code()); }

  // "NotFound: s3://bucket/key: no such key (HTTP 404)"; "OK" for success.
  std::string ToString() const;
  // A copy with `context` prepended to the message: "context: message".
  Status WithContext(std::string_view context) const;

 private:
  struct State {
    StatusCode code;
    std::string message;
    int posix_errno = 0;
  };
  std::shared_ptr<const State> state_;
};

// Propagates a non-OK Status from an expression to the caller.
#define LC_RETURN_IF_ERROR(expr)      \
  do {                                \
    ::lakecache::Status _st = (expr); \
    if (!_st.ok()) return _st;        \
  } while (0)

}  // namespace lakecache
