#include "ufs/synthetic_store.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "common/units.h"

namespace lakecache {
namespace {

constexpr uint64_t kMaxObjects = 1'000'000'000'000ull;
constexpr uint64_t kMaxSize = 1ull << 40;
constexpr int64_t kMtime = 1767225600;  // 2026-01-01T00:00:00Z, every object's

// splitmix64's finalizer: a well-mixed 64-bit function of x.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

Status SpecError(std::string_view spec, const std::string& what) {
  return Status::InvalidArgument("synthetic store '" + std::string(spec) + "': " + what +
                                 " (expected e.g. synthetic://1M,fanout=1000,size=4KiB-64KiB)");
}

// "1000000", "1M", "10k", "2G": a count with a decimal suffix.
bool ParseCount(std::string_view text, uint64_t* out) {
  uint64_t scale = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 'k':
      case 'K':
        scale = 1000;
        break;
      case 'M':
        scale = 1000 * 1000;
        break;
      case 'G':
        scale = 1000 * 1000 * 1000;
        break;
      default:
        break;
    }
    if (scale != 1) text.remove_suffix(1);
  }
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return false;
  if (n > kMaxObjects / scale) return false;
  *out = n * scale;
  return true;
}

Status ParseSizes(std::string_view spec, std::string_view text, SyntheticSpec* out) {
  size_t dash = text.find('-');
  Result<uint64_t> low = ParseByteSize(text.substr(0, dash));
  Result<uint64_t> high =
      dash == std::string_view::npos ? low : ParseByteSize(text.substr(dash + 1));
  if (!low.ok() || !high.ok() || *low > *high || *high > kMaxSize) {
    return SpecError(spec,
                     "invalid size '" + std::string(text) + "' (a size, or MIN-MAX, at most 1TiB)");
  }
  out->min_size = *low;
  out->max_size = *high;
  return Status::Ok();
}

// Appends `value` zero-padded to `width` digits.
void AppendPadded(std::string* out, uint64_t value, int width) {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), value);
  int n = static_cast<int>(end - digits);
  if (n < width) out->append(width - n, '0');
  out->append(digits, end);
}

// Reads `width` digits at *at of `key`, advancing *at; false when they are not there.
bool TakeDigits(std::string_view key, size_t* at, int width, uint64_t* value) {
  if (key.size() < *at + width) return false;
  uint64_t v = 0;
  for (int i = 0; i < width; ++i) {
    char c = key[*at + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *at += width;
  *value = v;
  return true;
}

}  // namespace

Result<SyntheticSpec> SyntheticSpec::Parse(std::string_view text) {
  SyntheticSpec spec;
  bool counted = false;
  std::string_view rest = text;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    size_t eq = item.find('=');
    std::string_view name = eq == std::string_view::npos ? "objects" : item.substr(0, eq);
    std::string_view value = eq == std::string_view::npos ? item : item.substr(eq + 1);
    if (name == "objects") {
      if (!ParseCount(value, &spec.objects) || spec.objects == 0) {
        return SpecError(text, "invalid object count '" + std::string(value) +
                                   "' (1 to 10^12; k, M and G mean 10^3, 10^6 and 10^9)");
      }
      counted = true;
    } else if (name == "fanout") {
      if (!ParseCount(value, &spec.fanout) || spec.fanout < 2) {
        return SpecError(text, "invalid fanout '" + std::string(value) + "' (2 or more)");
      }
    } else if (name == "size") {
      LC_RETURN_IF_ERROR(ParseSizes(text, value, &spec));
    } else if (name == "seed") {
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), spec.seed);
      if (ec != std::errc() || end != value.data() + value.size() || value.empty()) {
        return SpecError(text, "invalid seed '" + std::string(value) + "' (a number)");
      }
    } else {
      return SpecError(text, "unknown option '" + std::string(name) +
                                 "' (expected objects, fanout, size or seed)");
    }
  }
  if (!counted) return SpecError(text, "no object count");
  return spec;
}

SyntheticStore::SyntheticStore(const SyntheticSpec& spec, std::string name)
    : spec_(spec), name_(std::move(name)) {
  uint64_t leaves = (spec_.objects + spec_.fanout - 1) / spec_.fanout;
  for (uint64_t reach = 1;
       reach<leaves; reach = reach> UINT64_MAX / spec_.fanout ? UINT64_MAX : reach * spec_.fanout) {
    ++levels_;
  }
  for (uint64_t top = spec_.fanout - 1; top >= 10; top /= 10) ++width_;
}

std::string SyntheticStore::Describe() const { return "synthetic://" + name_; }

std::string SyntheticStore::KeyOf(uint64_t index) const {
  std::string key;
  key.reserve(static_cast<size_t>(levels_ + 1) * (width_ + 2) + 4);
  uint64_t leaf = index / spec_.fanout;
  uint64_t divisor = 1;
  for (int l = 1; l < levels_; ++l) divisor *= spec_.fanout;
  for (int l = 0; l < levels_; ++l) {
    key += 'd';
    AppendPadded(&key, leaf / divisor % spec_.fanout, width_);
    key += '/';
    divisor /= spec_.fanout;
  }
  key += 'f';
  AppendPadded(&key, index % spec_.fanout, width_);
  key += ".bin";
  return key;
}

ObjectInfo SyntheticStore::InfoOf(uint64_t index) const {
  uint64_t base = Mix(spec_.seed ^ Mix(index));
  ObjectInfo info;
  info.key = KeyOf(index);
  info.size = spec_.min_size + (spec_.max_size == spec_.min_size
                                    ? 0
                                    : Mix(base ^ 0x51) % (spec_.max_size - spec_.min_size + 1));
  char etag[33];
  std::snprintf(etag, sizeof(etag), "%016llx%016llx",
                static_cast<unsigned long long>(Mix(base ^ 0xe1)),
                static_cast<unsigned long long>(Mix(base ^ info.size)));
  info.etag = etag;
  info.mtime = kMtime;
  return info;
}

char SyntheticStore::ByteOf(uint64_t index, uint64_t offset) const {
  uint64_t word = Mix(Mix(spec_.seed ^ Mix(index)) + offset / 8);
  return static_cast<char>(word >> (8 * (offset % 8)));
}

uint64_t SyntheticStore::IndexOf(std::string_view key) const {
  size_t at = 0;
  uint64_t leaf = 0;
  uint64_t digit = 0;
  for (int l = 0; l < levels_; ++l) {
    if (at >= key.size() || key[at++] != 'd' || !TakeDigits(key, &at, width_, &digit) ||
        digit >= spec_.fanout || at >= key.size() || key[at++] != '/') {
      return spec_.objects;
    }
    leaf = leaf * spec_.fanout + digit;
  }
  if (at >= key.size() || key[at++] != 'f' || !TakeDigits(key, &at, width_, &digit) ||
      digit >= spec_.fanout || key.substr(at) != ".bin") {
    return spec_.objects;
  }
  if (leaf > (spec_.objects - 1) / spec_.fanout) return spec_.objects;
  uint64_t index = leaf * spec_.fanout + digit;
  return index < spec_.objects ? index : spec_.objects;
}

uint64_t SyntheticStore::LowerBound(std::string_view key) const {
  uint64_t lo = 0, hi = spec_.objects;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (KeyOf(mid) < key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

uint64_t SyntheticStore::PastPrefix(std::string_view prefix) const {
  uint64_t lo = 0, hi = spec_.objects;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    std::string key = KeyOf(mid);
    if (key < prefix || key.starts_with(prefix)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

Status SyntheticStore::NotFound(std::string_view key) const {
  return Status::NotFound(Describe() + ": no object '" + std::string(key) + "'");
}

Result<ListPage> SyntheticStore::List(const ListRequest& request, const IoOptions&) {
  const std::string& prefix = request.prefix;
  const std::string& delim = request.delimiter;
  const std::string& token = request.continuation_token;
  // At most 1,000 entries a page, as S3 gives.
  size_t max_keys = request.max_keys > 0 ? std::min<size_t>(request.max_keys, 1000) : 1000;
  uint64_t i = LowerBound(prefix);
  uint64_t end = PastPrefix(prefix);
  if (!token.empty()) {
    // The page after the entry named: past every key of a common prefix, or past the key.
    uint64_t after = !delim.empty() && token.ends_with(delim) ? PastPrefix(token) : [&] {
      uint64_t at = LowerBound(token);
      return at < spec_.objects && KeyOf(at) == token ? at + 1 : at;
    }();
    i = std::max(i, after);
  }
  ListPage page;
  std::string last;
  for (size_t count = 0; i < end;) {
    if (count == max_keys) {
      page.truncated = true;
      page.next_token = last;
      break;
    }
    std::string key = KeyOf(i);
    size_t cut = delim.empty() ? std::string::npos : key.find(delim, prefix.size());
    if (cut != std::string::npos) {
      std::string group = key.substr(0, cut + delim.size());
      i = PastPrefix(group);
      if (!token.empty() && group <= token) continue;  // S3 starts after the token's entry
      last = std::move(group);
      page.common_prefixes.push_back(last);
    } else {
      page.objects.push_back(InfoOf(i));
      last = std::move(key);
      ++i;
    }
    ++count;
  }
  return page;
}

Result<ObjectInfo> SyntheticStore::Head(std::string_view key, const IoOptions&) {
  uint64_t index = IndexOf(key);
  if (index == spec_.objects) return NotFound(key);
  return InfoOf(index);
}

Result<ReadReply> SyntheticStore::ReadRaw(std::string_view key, uint64_t offset,
                                          std::span<const std::span<char>> bufs,
                                          const ReadOptions&) {
  uint64_t index = IndexOf(key);
  if (index == spec_.objects) return NotFound(key);
  ObjectInfo info = InfoOf(index);
  ReadReply reply;
  reply.etag = info.etag;
  reply.object_size = info.size;
  uint64_t base = Mix(spec_.seed ^ Mix(index));
  uint64_t at = offset;
  for (std::span<char> buf : bufs) {
    size_t n =
        at >= info.size ? 0 : static_cast<size_t>(std::min<uint64_t>(buf.size(), info.size - at));
    for (size_t done = 0; done < n;) {
      uint64_t word = Mix(base + (at + done) / 8);
      size_t skip = (at + done) % 8;
      size_t take = std::min<size_t>(8 - skip, n - done);
      for (size_t b = 0; b < take; ++b) buf[done + b] = static_cast<char>(word >> (8 * (skip + b)));
      done += take;
    }
    at += n;
    reply.bytes += n;
    if (n < buf.size()) break;
  }
  return reply;
}

}  // namespace lakecache
