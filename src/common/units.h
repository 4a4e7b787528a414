// Parsing and printing of byte sizes ("4MiB", "512M", "1.5GB") and durations ("30s", "5m",
// "250ms").
//
// Sizes: B; KiB/MiB/GiB/TiB and the short forms K/M/G/T (and k) are powers of 1024; kB/KB, MB, GB,
// TB are powers of 1000. A bare number is bytes. Durations: ms, s, m, h, d, combinable ("1h30m"); a
// bare 0 is allowed, other bare numbers are rejected (ambiguous). Formatting is exact, so it parses
// back to the same value. Pure functions, thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace lakecache {

using Duration = std::chrono::milliseconds;

Result<uint64_t> ParseByteSize(std::string_view text);
Result<Duration> ParseDuration(std::string_view text);

// "4MiB", "1.5GiB", "123B": the largest binary unit that states the value exactly (one decimal at
// most).
std::string FormatByteSize(uint64_t bytes);
// For people, rounded: "512 B", "1.5 GiB".
std::string HumanByteSize(uint64_t bytes);
// "30s", "5m", "250ms", "1h30m".
std::string FormatDuration(Duration d);

// Milliseconds of the steady clock: for "when did X last happen" kept in an atomic.
int64_t SteadyNowMs();

}  // namespace lakecache
