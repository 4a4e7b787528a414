#include <charconv>
#include <cstdio>
#include <vector>

#include "cli/commands.h"

namespace lakecache::cli {
namespace {

constexpr size_t kChunk = 8 << 20;

struct ByteRange {
  uint64_t first = 0;
  uint64_t last = UINT64_MAX;  // inclusive
};

bool ParseNumber(std::string_view s, uint64_t* out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return !s.empty() && ec == std::errc() && ptr == s.data() + s.size();
}

// "A-B" (inclusive, as in HTTP) or "A-" (to the end).
Result<ByteRange> ParseRange(const std::string& text) {
  ByteRange r;
  size_t dash = text.find('-');
  bool ok =
      dash != std::string::npos && ParseNumber(std::string_view(text).substr(0, dash), &r.first);
  std::string_view rest = std::string_view(text).substr(dash == std::string::npos ? 0 : dash + 1);
  if (ok && !rest.empty()) ok = ParseNumber(rest, &r.last) && r.last >= r.first;
  if (!ok) {
    return Status::InvalidArgument("--range '" + text +
                                   "': expected FIRST-LAST (inclusive byte offsets) or FIRST-");
  }
  return r;
}

}  // namespace

int RunCat(const CliContext& ctx, const std::string& uri, const std::string& range_text) {
  ByteRange range;
  if (!range_text.empty()) {
    auto parsed = ParseRange(range_text);
    if (!parsed.ok()) return ReportError(parsed.status());
    range = *parsed;
  }
  auto target = ctx.Open(uri);
  if (!target.ok()) return ReportError(target.status());
  ObjectStore& store = *target->store;
  const std::string& key = target->uri.key;
  auto info = store.Head(key, IoOptions{});
  if (!info.ok()) return ReportError(info.status());
  if (info->size == 0 && range_text.empty()) return kExitOk;
  if (range.first >= info->size) {
    return ReportError(Status::InvalidArgument("--range " + range_text +
                                               ": starts past the end of " + target->shown + " (" +
                                               std::to_string(info->size) + " bytes)"));
  }
  uint64_t end = std::min<uint64_t>(range.last, info->size - 1) + 1;
  ReadOptions options;
  options.if_match = info->etag;  // every chunk from the same version of the object
  std::vector<char> buf(std::min<uint64_t>(kChunk, end - range.first));
  for (uint64_t off = range.first; off < end;) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), end - off));
    auto n = store.Read(key, off, std::span<char>(buf.data(), want), options);
    if (!n.ok()) return ReportError(n.status());
    if (*n == 0) {
      return ReportError(Status::Unavailable(target->shown + ": object ended at " +
                                             std::to_string(off) + " bytes, expected " +
                                             std::to_string(end)));
    }
    if (std::fwrite(buf.data(), 1, *n, stdout) != *n) {
      return ReportError(Status::IoError("writing to stdout failed"));
    }
    off += *n;
  }
  return std::fflush(stdout) == 0 ? kExitOk : kExitFailure;
}

}  // namespace lakecache::cli
