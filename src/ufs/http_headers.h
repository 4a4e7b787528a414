// The parts of an HTTP response that arrive as text: header lines as libcurl hands them to
// HttpClient, and the Content-Length and Content-Range values S3Store reads. Kept apart from the
// transfer code so they can be tested and fuzzed without a server. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "ufs/sigv4.h"

namespace lakecache {

// One raw header line ("Name: value\r\n"): appended to `headers` with the name lowercased and
// both sides trimmed. A status line ("HTTP/1.1 200 OK") clears `headers`: a new response starts
// (after 100-continue or a redirect). A line without a colon (the blank end line) is ignored.
void AddHeaderLine(std::string_view line, HeaderList* headers);

// A Content-Length value; nullopt when it is not a number.
std::optional<uint64_t> ParseContentLength(std::string_view value);

inline constexpr uint64_t kUnknownTotal = UINT64_MAX;

struct ContentRange {
  uint64_t first = 0;
  uint64_t last = 0;
  uint64_t total = kUnknownTotal;  // "*" in the header
};

// "bytes 100-199/1000" or "bytes 100-199/*" (a 206 reply).
bool ParseContentRange(std::string_view value, ContentRange* out);

// The total of "bytes */1000" (a 416 reply to a range past the end); nullopt for another form.
std::optional<uint64_t> ParseUnsatisfiedRange(std::string_view value);

}  // namespace lakecache
