#include "ufs/http_headers.h"

#include <cctype>
#include <cstdio>
#include <exception>
#include <string>

namespace lakecache {
namespace {

std::string Lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view TrimWs(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

void AddHeaderLine(std::string_view line, HeaderList* headers) {
  if (line.starts_with("HTTP/")) {
    headers->clear();
    return;
  }
  size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    headers->emplace_back(Lowercase(TrimWs(line.substr(0, colon))),
                          std::string(TrimWs(line.substr(colon + 1))));
  }
}

std::optional<uint64_t> ParseContentLength(std::string_view value) {
  try {
    if (!value.empty()) return static_cast<uint64_t>(std::stoull(std::string(value)));
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

bool ParseContentRange(std::string_view value, ContentRange* out) {
  std::string header(value);
  unsigned long long first = 0, last = 0, total = 0;
  if (std::sscanf(header.c_str(), "bytes %llu-%llu/%llu", &first, &last, &total) == 3) {
    *out = {first, last, total};
    return true;
  }
  if (std::sscanf(header.c_str(), "bytes %llu-%llu/*", &first, &last) == 2) {
    *out = {first, last, kUnknownTotal};
    return true;
  }
  return false;
}

std::optional<uint64_t> ParseUnsatisfiedRange(std::string_view value) {
  std::string header(value);
  unsigned long long total = 0;
  if (std::sscanf(header.c_str(), "bytes */%llu", &total) == 1) return total;
  return std::nullopt;
}

}  // namespace lakecache
