#include <cstdio>
#include <ctime>

#include "cli/commands.h"

namespace lakecache::cli {
namespace {

std::string FormatTime(int64_t mtime) {
  if (mtime <= 0) return "                   ";  // unknown: keep the columns
  std::time_t t = static_cast<std::time_t>(mtime);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

// Names are shown relative to the "directory" part of what was asked for, as `aws s3 ls` does.
std::string BaseOf(const std::string& key) {
  size_t slash = key.rfind('/');
  return slash == std::string::npos ? "" : key.substr(0, slash + 1);
}

}  // namespace

int RunLs(const CliContext& ctx, const std::string& uri, bool recursive) {
  auto target = ctx.Open(uri);
  if (!target.ok()) return ReportError(target.status());
  const std::string& prefix = target->uri.key;
  Duration limit = ctx.flags().timeout;
  auto notice = NoticeWaitFor(target->endpoint, limit);
  // Each page within --timeout: a long listing goes on while pages keep coming.
  auto listing = ListAll(*target->store, prefix, recursive ? "" : "/", IoOptions{}, limit);
  notice.reset();
  if (!listing.ok()) {
    return ReportError(ExplainTimeout(listing.status(), target->endpoint, "listing " + uri, limit));
  }
  if (!prefix.empty() && listing->objects.empty() && listing->common_prefixes.empty()) {
    return ReportError(Status::NotFound(target->shown + ": no such key or prefix"));
  }
  std::string base = BaseOf(prefix);
  for (const std::string& p : listing->common_prefixes) {
    std::printf("%26s PRE %s\n", "", p.substr(base.size()).c_str());
  }
  for (const ObjectInfo& o : listing->objects) {
    std::string name = o.key.substr(base.size());
    if (name.empty()) continue;  // the "dir/" marker of the folder being listed
    std::printf("%s %10llu %s\n", FormatTime(o.mtime).c_str(),
                static_cast<unsigned long long>(o.size), name.c_str());
  }
  return std::fflush(stdout) == 0 ? kExitOk : kExitFailure;
}

}  // namespace lakecache::cli
