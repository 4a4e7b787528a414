#include "common/logging.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace lakecache {

Status InitLogging(const std::string& level, const std::string& file) {
  spdlog::level::level_enum lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") {
    return Status::InvalidArgument("--log-level: unknown level '" + level +
                                   "' (expected trace, debug, info, warn, error or off)");
  }
  std::shared_ptr<spdlog::logger> logger;
  spdlog::drop("lakecache");  // a daemon re-initialises after fork
  try {
    if (file.empty()) {
      logger = spdlog::stderr_logger_mt("lakecache");
    } else {
      logger = spdlog::basic_logger_mt("lakecache", file);
    }
  } catch (const spdlog::spdlog_ex& e) {
    return Status::IoError("--log-file " + file + ": " + e.what());
  }
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%t] %v");
  logger->set_level(lvl);
  // Every line from info up reaches the file at once: a process killed (SIGKILL, OOM) leaves its
  // last events behind. Info lines are events, not per-request traces, so this costs nothing.
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  return Status::Ok();
}

}  // namespace lakecache
