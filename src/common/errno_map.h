// The one place where a Status becomes an errno for a reader (the kernel, or the native data path).
#pragma once

#include "common/status.h"

namespace lakecache {

// ENOENT for kNotFound, EACCES for kAccessDenied, EIO for transient or unknown failures, ...
int StatusToErrno(const Status& status);

}  // namespace lakecache
