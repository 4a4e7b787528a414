#include "common/errno_map.h"

#include <cerrno>

namespace lakecache {

int StatusToErrno(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return 0;
    case StatusCode::kNotFound:
      return ENOENT;
    case StatusCode::kAccessDenied:
    case StatusCode::kUnauthenticated:
      return EACCES;
    case StatusCode::kInvalidArgument:
      return EINVAL;
    case StatusCode::kDeadlineExceeded:
      return ETIMEDOUT;
    case StatusCode::kNoSpace:
      return ENOSPC;
    case StatusCode::kPreconditionFailed:
      return EIO;  // the object changed under an open file: see docs/semantics.md
    case StatusCode::kUnimplemented:
      return ENOSYS;
    case StatusCode::kRefused:
      return status.posix_errno() > 0 ? status.posix_errno() : EPERM;
    case StatusCode::kUnavailable:
    case StatusCode::kIoError:
    case StatusCode::kCorruption:
    case StatusCode::kInternal:
      return EIO;
  }
  return EIO;
}

}  // namespace lakecache
