#include "common/status.h"

#include <cerrno>
#include <cstring>

namespace lakecache {

Status Status::IoErrorFromErrno(const std::string& what) {
  return IoError(what + ": " + std::strerror(errno));
}

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "InvalidArgument";
    case StatusCode::kNotFound:
      return "NotFound";
    case StatusCode::kAccessDenied:
      return "AccessDenied";
    case StatusCode::kUnavailable:
      return "Unavailable";
    case StatusCode::kDeadlineExceeded:
      return "DeadlineExceeded";
    case StatusCode::kIoError:
      return "IoError";
    case StatusCode::kNoSpace:
      return "NoSpace";
    case StatusCode::kCorruption:
      return "Corruption";
    case StatusCode::kPreconditionFailed:
      return "PreconditionFailed";
    case StatusCode::kUnimplemented:
      return "Unimplemented";
    case StatusCode::kInternal:
      return "Internal";
    case StatusCode::kUnauthenticated:
      return "Unauthenticated";
    case StatusCode::kRefused:
      return "Refused";
  }
  return "Unknown";
}

bool IsRetryable(StatusCode code) { return code == StatusCode::kUnavailable; }

bool IsPeerFailure(StatusCode code) {
  switch (code) {
    case StatusCode::kUnavailable:       // refused, reset, 5xx, SlowDown
    case StatusCode::kDeadlineExceeded:  // no answer in time
    case StatusCode::kIoError:           // the transfer, or the peer's own I/O, failed
    case StatusCode::kCorruption:        // the answer arrived damaged
    case StatusCode::kInternal:          // the answer could not be read, or the peer broke
      return true;
    case StatusCode::kOk:
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kAccessDenied:
    case StatusCode::kUnauthenticated:
    case StatusCode::kNoSpace:
    case StatusCode::kPreconditionFailed:
    case StatusCode::kUnimplemented:
    case StatusCode::kRefused:
      return false;
  }
  return false;
}

Status::Status(StatusCode code, std::string message) {
  if (code != StatusCode::kOk) {
    state_ = std::make_shared<const State>(State{code, std::move(message)});
  }
}

Status Status::Refused(int posix_errno, std::string msg) {
  Status s;
  s.state_ =
      std::make_shared<const State>(State{StatusCode::kRefused, std::move(msg), posix_errno});
  return s;
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return state_ ? state_->message : kEmpty;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(code()));
  out += ": ";
  out += message();
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string msg(context);
  msg += ": ";
  msg += message();
  Status s;
  s.state_ = std::make_shared<const State>(State{code(), std::move(msg), posix_errno()});
  return s;
}

}  // namespace lakecache
