#include "common/units.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace lakecache {
namespace {

struct Unit {
  std::string_view suffix;
  uint64_t factor;
};

constexpr uint64_t kKi = 1024;
constexpr Unit kSizeUnits[] = {
    {"", 1},
    {"B", 1},
    {"K", kKi},
    {"k", kKi},
    {"KiB", kKi},
    {"Ki", kKi},
    {"M", kKi* kKi},
    {"MiB", kKi* kKi},
    {"Mi", kKi* kKi},
    {"G", kKi* kKi* kKi},
    {"GiB", kKi* kKi* kKi},
    {"Gi", kKi* kKi* kKi},
    {"T", kKi* kKi* kKi* kKi},
    {"TiB", kKi* kKi* kKi* kKi},
    {"Ti", kKi* kKi* kKi* kKi},
    {"kB", 1'000},
    {"KB", 1'000},
    {"MB", 1'000'000},
    {"GB", 1'000'000'000},
    {"TB", 1'000'000'000'000},
};

constexpr Unit kDurationUnits[] = {
    {"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}, {"d", 86'400'000},
};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// A non-negative decimal number with its whole part kept exactly: a double holds integers only up
// to 2^53, so "9007199254740993B" would come back as another size.
struct Number {
  uint64_t whole = 0;
  double fraction = 0;    // in [0, 1)
  bool overflow = false;  // the whole part does not fit 64 bits
};

// Splits "1.5GiB" into 1.5 and "GiB". Returns false if there is no leading non-negative number.
bool SplitNumber(std::string_view s, Number* number, std::string_view* suffix) {
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  std::string_view text = s.substr(0, i);
  size_t point = std::min(text.find('.'), text.size());
  std::string_view whole = text.substr(0, point);
  std::string digits = "0" + std::string(text.substr(point));  // "0.5", or "0" without a point
  if (text.empty() || text == "." || digits.find('.', 2) != std::string::npos) return false;
  if (!whole.empty()) {
    auto [ptr, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), number->whole);
    number->overflow = ec == std::errc::result_out_of_range;
  }
  std::from_chars(digits.data(), digits.data() + digits.size(), number->fraction);
  *suffix = Trim(s.substr(i));
  return true;
}

// number * factor, rounded to a whole; false when it does not fit `limit`.
bool Scale(const Number& number, uint64_t factor, uint64_t limit, uint64_t* out) {
  uint64_t part = static_cast<uint64_t>(std::round(number.fraction * static_cast<double>(factor)));
  return !number.overflow && !__builtin_mul_overflow(number.whole, factor, out) &&
         !__builtin_add_overflow(*out, part, out) && *out <= limit;
}

}  // namespace

Result<uint64_t> ParseByteSize(std::string_view text) {
  std::string_view s = Trim(text);
  Number number;
  std::string_view suffix;
  if (!SplitNumber(s, &number, &suffix)) {
    return Status::InvalidArgument("invalid size '" + std::string(text) +
                                   "' (expected e.g. 4MiB, 512M, 10GiB)");
  }
  for (const Unit& u : kSizeUnits) {
    if (u.suffix != suffix) continue;
    uint64_t bytes = 0;
    if (!Scale(number, u.factor, UINT64_MAX, &bytes)) {
      return Status::InvalidArgument("size '" + std::string(text) + "' is too large");
    }
    return bytes;
  }
  return Status::InvalidArgument(
      "invalid size unit in '" + std::string(text) +
      "' (expected B, KiB, MiB, GiB, TiB, K, M, G, T, kB, MB, GB or TB)");
}

Result<Duration> ParseDuration(std::string_view text) {
  std::string_view s = Trim(text);
  auto invalid = [&](std::string_view why) {
    return Status::InvalidArgument("invalid duration '" + std::string(text) + "'" +
                                   std::string(why) + " (expected e.g. 30s, 5m, 1h30m, 250ms)");
  };
  if (s == "0") return Duration(0);
  if (s.empty()) return invalid("");
  // One or more number+unit parts: "90s", "1h30m", "1.5h". Summed in whole milliseconds, each
  // part rounded, checked against the 63 bits a Duration holds.
  constexpr uint64_t kMaxMs = INT64_MAX;
  uint64_t total_ms = 0;
  while (!s.empty()) {
    Number number;
    std::string_view rest;
    if (!SplitNumber(s, &number, &rest)) return invalid("");
    size_t unit_len = 0;
    while (unit_len < rest.size() && std::isalpha(static_cast<unsigned char>(rest[unit_len]))) {
      ++unit_len;
    }
    std::string_view unit = rest.substr(0, unit_len);
    const Unit* match = nullptr;
    for (const Unit& u : kDurationUnits) {
      if (u.suffix == unit) match = &u;
    }
    if (match == nullptr) return invalid(unit.empty() ? ": missing unit" : ": unknown unit");
    uint64_t ms = 0;
    if (!Scale(number, match->factor, kMaxMs, &ms) ||
        __builtin_add_overflow(total_ms, ms, &total_ms) || total_ms > kMaxMs) {
      return invalid(": too long");
    }
    s = Trim(rest.substr(unit_len));
  }
  return Duration(static_cast<int64_t>(total_ms));
}

std::string FormatByteSize(uint64_t bytes) {
  static constexpr std::pair<const char*, uint64_t> kUnits[] = {
      {"TiB", 1ull << 40}, {"GiB", 1ull << 30}, {"MiB", 1ull << 20}, {"KiB", 1ull << 10}};
  for (const auto& [name, factor] : kUnits) {
    if (bytes < factor) continue;
    if (bytes % factor == 0) return std::to_string(bytes / factor) + name;
    if ((bytes * 10) % factor == 0 && bytes < (UINT64_MAX / 10)) {
      return std::to_string(bytes / factor) + "." + std::to_string((bytes * 10 / factor) % 10) +
             name;
    }
  }
  return std::to_string(bytes) + "B";
}

std::string FormatDuration(Duration d) {
  int64_t ms = d.count();
  if (ms == 0) return "0s";
  if (ms % 1000 != 0) return std::to_string(ms) + "ms";
  int64_t s = ms / 1000;
  std::string out;
  if (s >= 3600) {
    out += std::to_string(s / 3600) + "h";
    s %= 3600;
  }
  if (s >= 60) {
    out += std::to_string(s / 60) + "m";
    s %= 60;
  }
  if (s > 0) out += std::to_string(s) + "s";
  return out;
}

std::string HumanByteSize(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), unit == 0 ? "%.0f %s" : "%.1f %s", value, kUnits[unit]);
  return buf;
}

int64_t SteadyNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace lakecache
