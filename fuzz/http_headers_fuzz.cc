// Feeds the bytes as the header lines of one HTTP response (split after each '\n', as libcurl
// hands them over) to HttpClient's header parsing, then each value to the Content-Length and
// Content-Range parsers S3Store uses. Asserts names come out lowercased and trimmed, the first
// header of a name is the one found, and every parsed number prints and parses back unchanged.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ufs/http_client.h"
#include "ufs/http_headers.h"

namespace lakecache {
namespace {

bool Trimmed(std::string_view s) {
  return s.empty() || (!std::isspace(static_cast<unsigned char>(s.front())) &&
                       !std::isspace(static_cast<unsigned char>(s.back())));
}

void CheckHeader(const std::string& name, const std::string& value) {
  for (char c : name) {
    if (std::isupper(static_cast<unsigned char>(c))) __builtin_trap();
  }
  if (!Trimmed(name) || !Trimmed(value)) __builtin_trap();
}

void CheckValue(const std::string& value) {
  if (std::optional<uint64_t> length = ParseContentLength(value)) {
    if (ParseContentLength(std::to_string(*length)) != length) __builtin_trap();
  }
  ContentRange range;
  if (ParseContentRange(value, &range)) {
    std::string total = range.total == kUnknownTotal ? "*" : std::to_string(range.total);
    std::string printed =
        "bytes " + std::to_string(range.first) + "-" + std::to_string(range.last) + "/" + total;
    ContentRange again;
    if (!ParseContentRange(printed, &again) || again.first != range.first ||
        again.last != range.last || again.total != range.total) {
      __builtin_trap();
    }
  }
  if (std::optional<uint64_t> total = ParseUnsatisfiedRange(value)) {
    if (ParseUnsatisfiedRange("bytes */" + std::to_string(*total)) != total) __builtin_trap();
  }
}

}  // namespace
}  // namespace lakecache

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lakecache;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  HttpResponse response;
  while (!text.empty()) {
    size_t end = text.find('\n');
    end = end == std::string_view::npos ? text.size() : end + 1;
    size_t before = response.headers.size();
    AddHeaderLine(text.substr(0, end), &response.headers);
    if (response.headers.size() > before + 1) __builtin_trap();  // one line, one header at most
    text.remove_prefix(end);
  }
  for (const auto& [name, value] : response.headers) {
    CheckHeader(name, value);
    // Header() answers with the first header of that name.
    for (const auto& [n, v] : response.headers) {
      if (n == name) {
        if (response.Header(name) != v) __builtin_trap();
        break;
      }
    }
    CheckValue(value);
  }
  CheckValue(std::string(reinterpret_cast<const char*>(data), size));  // the bytes as one value
  return 0;
}
