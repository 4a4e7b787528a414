#include <charconv>
#include <cstdio>
#include <vector>

#include "cli/commands.h"

namespace lakecache::cli {
namespace {

// Each chunk is one read that must arrive within --timeout: a store that stops sending fails `cat`
// in that time, while a big object takes as long as it needs. Chunks start at 1 MiB, grow to 8 MiB
// while they arrive in under an eighth of the timeout and shrink (to 64 KiB) when one takes over a
// quarter of it, so a slow but steady store never meets the bound.
class ChunkSize {
 public:
  explicit ChunkSize(Duration limit) : limit_(limit) {}
  size_t bytes() const { return bytes_; }
  void Took(Clock::duration took) {
    if (took < limit_ / 8) bytes_ = std::min(bytes_ * 2, kMax);
    if (took > limit_ / 4) bytes_ = std::max(bytes_ / 2, kMin);
  }

 private:
  static constexpr size_t kMin = 64 << 10;
  static constexpr size_t kMax = 8 << 20;
  const Duration limit_;
  size_t bytes_ = 1 << 20;
};

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
  Duration limit = ctx.flags().timeout;
  auto explain = [&](const Status& status, const std::string& what) {
    return ReportError(ExplainTimeout(status, target->endpoint, what, limit));
  };
  auto notice = NoticeWaitFor(target->endpoint, limit);
  auto info = store.Head(key, IoOptions::WithTimeout(limit));
  notice.reset();
  if (!info.ok()) return explain(info.status(), "asking for " + target->uri.ToString());
  if (info->size == 0 && range_text.empty()) return kExitOk;
  if (range.first >= info->size) {
    return ReportError(Status::InvalidArgument("--range " + range_text +
                                               ": starts past the end of " + target->shown + " (" +
                                               std::to_string(info->size) + " bytes)"));
  }
  uint64_t end = std::min<uint64_t>(range.last, info->size - 1) + 1;
  ReadOptions options;
  options.if_match = info->etag;  // every chunk from the same version of the object
  ChunkSize chunk(limit);
  std::vector<char> buf;
  for (uint64_t off = range.first; off < end;) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(chunk.bytes(), end - off));
    if (buf.size() < want) buf.resize(want);
    auto start = Clock::now();
    options.deadline = start + limit;
    notice = NoticeWaitFor(target->endpoint, limit);
    auto n = store.Read(key, off, std::span<char>(buf.data(), want), options);
    notice.reset();
    if (!n.ok()) {
      return explain(n.status(),
                     "reading " + target->uri.ToString() + " at byte " + std::to_string(off));
    }
    chunk.Took(Clock::now() - start);
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
