// Process-wide logging set-up over spdlog.
//
// Call InitLogging once at start (before threads). Code logs with spdlog::info/warn/... directly.
// Secrets must never be passed to a log call; the Secret type (common/secret.h) formats as
// "<redacted>".
#pragma once

#include <string>

#include "common/status.h"

namespace lakecache {

// level: trace, debug, info, warn, error, off. An empty file logs to stderr.
Status InitLogging(const std::string& level, const std::string& file);

}  // namespace lakecache
