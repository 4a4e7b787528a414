#include <cstdio>

#include "cli/commands.h"

namespace lakecache::cli {

int RunConfigShow(const CliContext& ctx) {
  if (ctx.flags().config_file.empty()) {
    return ReportError(Status::InvalidArgument("config show needs --config FILE"));
  }
  auto config = ctx.LoadConfig();
  if (!config.ok()) return ReportError(config.status());
  std::fputs(RenderConfig(*config).c_str(), stdout);
  return kExitOk;
}

}  // namespace lakecache::cli
