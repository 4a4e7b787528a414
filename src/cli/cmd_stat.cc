#include <cstdio>
#include <ctime>

#include "cli/commands.h"

namespace lakecache::cli {
namespace {

// A key that is not an object may still be a folder: a prefix with something under it.
Result<bool> IsFolder(ObjectStore& store, const std::string& key, const IoOptions& options) {
  ListRequest req;
  req.prefix = key;
  if (!req.prefix.empty() && !req.prefix.ends_with("/")) req.prefix.push_back('/');
  req.delimiter = "/";
  req.max_keys = 1;
  LC_ASSIGN_OR_RETURN(ListPage page, store.List(req, options));
  return !page.objects.empty() || !page.common_prefixes.empty();
}

}  // namespace

int RunStat(const CliContext& ctx, const std::string& uri) {
  auto target = ctx.Open(uri);
  if (!target.ok()) return ReportError(target.status());
  const std::string& key = target->uri.key;
  Duration limit = ctx.flags().timeout;
  auto notice = NoticeWaitFor(target->endpoint, limit);
  // The whole command within --timeout: at most a Head and a one-key listing.
  IoOptions options = IoOptions::WithTimeout(limit);
  auto explain = [&](const Status& status) {
    return ReportError(
        ExplainTimeout(status, target->endpoint, "asking for " + target->uri.ToString(), limit));
  };
  if (!key.empty()) {
    auto info = target->store->Head(key, options);
    if (info.ok()) {
      notice.reset();
      std::printf("uri: %s\ntype: file\nsize: %llu\netag: %s\nlast_modified: %s\n",
                  target->shown.c_str(), static_cast<unsigned long long>(info->size),
                  info->etag.c_str(), Iso8601(info->mtime).c_str());
      return kExitOk;
    }
    if (info.status().code() != StatusCode::kNotFound) return explain(info.status());
  }
  auto folder = IsFolder(*target->store, key, options);
  notice.reset();
  if (!folder.ok()) return explain(folder.status());
  if (!*folder && !key.empty()) {
    return ReportError(Status::NotFound(target->shown + ": no such key or prefix"));
  }
  std::printf("uri: %s\ntype: directory\n", target->shown.c_str());
  return kExitOk;
}

}  // namespace lakecache::cli
