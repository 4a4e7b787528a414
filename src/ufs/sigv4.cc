#include "ufs/sigv4.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <map>
#include <string>
#include <vector>

namespace lakecache {
namespace {

constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256";
constexpr std::string_view kHexDigits = "0123456789abcdef";     // lowercase, as signatures are
constexpr std::string_view kEscapeDigits = "0123456789ABCDEF";  // uppercase, as RFC 3986 prefers

using Digest = std::array<unsigned char, 32>;

std::string ToHex(const Digest& digest) {
  std::string out;
  out.reserve(digest.size() * 2);
  for (unsigned char b : digest) {
    out += kHexDigits[b >> 4];
    out += kHexDigits[b & 0xf];
  }
  return out;
}

// SHA-256 only fails when OpenSSL itself is broken (no default provider, out of memory); a
// signature computed from garbage would be rejected much later with a misleading 403, so stop here
// instead.
[[noreturn]] void CryptoFailed() { std::abort(); }

Digest Sha256(std::string_view data) {
  Digest out{};
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr) != 1) {
    CryptoFailed();
  }
  return out;
}

Digest HmacSha256(std::string_view key, std::string_view data) {
  Digest out{};
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), out.data(),
           &len) == nullptr) {
    CryptoFailed();
  }
  return out;
}

std::string_view AsView(const Digest& d) {
  return {reinterpret_cast<const char*>(d.data()), d.size()};
}

bool IsUnreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == '~';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Strict RFC 3986 decoding: '+' stays '+' (it is not a space outside HTML forms), and a malformed
// escape is kept literally so that re-encoding turns its '%' into %25.
std::string PercentDecode(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%' && i + 2 < in.size()) {
      int hi = HexValue(in[i + 1]);
      int lo = HexValue(in[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += in[i];
  }
  return out;
}

std::string Lowercase(std::string_view in) {
  std::string out(in);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Trims both ends and collapses inner runs of spaces and tabs to one space, as SigV4's Trimall
// does.
std::string TrimAll(std::string_view in) {
  std::string out;
  bool pending_space = false;
  for (char c : in) {
    if (c == ' ' || c == '\t') {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += c;
  }
  return out;
}

// RFC 3986 remove_dot_segments, plus dropping empty segments ("//"), which AWS also requires. A
// path that ended in a directory ("/a/", "/a/.", "/a/b/..") keeps its trailing slash.
std::string NormalizePath(std::string_view path) {
  std::vector<std::string_view> segments;
  bool trailing_slash = false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = std::min(path.find('/', start), path.size());
    std::string_view seg = path.substr(start, end - start);
    trailing_slash = seg.empty() || seg == "." || seg == "..";
    if (seg == "..") {
      if (!segments.empty()) segments.pop_back();
    } else if (!seg.empty() && seg != ".") {
      segments.push_back(seg);
    }
    start = end + 1;
  }
  std::string out;
  for (std::string_view seg : segments) {
    out += '/';
    out += seg;
  }
  if (trailing_slash || out.empty()) out += '/';
  return out;
}

std::string CanonicalPath(std::string_view path, bool normalize) {
  if (path.empty()) return "/";
  return normalize ? NormalizePath(path) : std::string(path);
}

std::string CanonicalQuery(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> params;
  size_t start = 0;
  while (start < query.size()) {
    size_t end = std::min(query.find('&', start), query.size());
    std::string_view param = query.substr(start, end - start);
    start = end + 1;
    if (param.empty()) continue;
    size_t eq = param.find('=');
    std::string_view name = param.substr(0, eq);
    std::string_view value = eq == std::string_view::npos ? "" : param.substr(eq + 1);
    params.emplace_back(UriEncode(PercentDecode(name), false),
                        UriEncode(PercentDecode(value), false));
  }
  std::sort(params.begin(), params.end());
  std::string out;
  for (const auto& [name, value] : params) {
    if (!out.empty()) out += '&';
    out += name;
    out += '=';
    out += value;
  }
  return out;
}

struct CanonicalHeaders {
  std::string block;         // "name:value\n" per header, sorted by name
  std::string signed_names;  // "host;x-amz-date"
};

CanonicalHeaders Canonicalize(const HeaderList& headers) {
  // std::map sorts by lowercase name; appending keeps repeated values in the order given.
  std::map<std::string, std::string> merged;
  for (const auto& [name, value] : headers) {
    auto [it, inserted] = merged.try_emplace(Lowercase(name), TrimAll(value));
    if (!inserted) {
      it->second += ',';
      it->second += TrimAll(value);
    }
  }
  CanonicalHeaders out;
  for (const auto& [name, value] : merged) {
    out.block += name + ':' + value + '\n';
    if (!out.signed_names.empty()) out.signed_names += ';';
    out.signed_names += name;
  }
  return out;
}

std::string ComputeSignature(const Secret& secret, const SigV4Scope& scope,
                             std::string_view string_to_sign) {
  // The secret and the derived key are wiped so that no stray heap copy outlives the call.
  std::string secret_key = "AWS4" + secret.Reveal();
  Digest key = HmacSha256(secret_key, scope.amz_date.substr(0, 8));
  OPENSSL_cleanse(secret_key.data(), secret_key.size());
  key = HmacSha256(AsView(key), scope.region);
  key = HmacSha256(AsView(key), scope.service);
  key = HmacSha256(AsView(key), "aws4_request");
  std::string signature = ToHex(HmacSha256(AsView(key), string_to_sign));
  OPENSSL_cleanse(key.data(), key.size());
  return signature;
}

}  // namespace

SigV4Signature SignV4(const SigV4Request& request, const SigV4Credentials& credentials,
                      const SigV4Scope& scope, bool normalize_path) {
  CanonicalHeaders headers = Canonicalize(request.headers);
  SigV4Signature sig;
  sig.canonical_request = request.method + '\n' + CanonicalPath(request.path, normalize_path) +
                          '\n' + CanonicalQuery(request.query) + '\n' + headers.block + '\n' +
                          headers.signed_names + '\n' + request.payload_hash;

  std::string credential_scope =
      scope.amz_date.substr(0, 8) + '/' + scope.region + '/' + scope.service + "/aws4_request";
  sig.string_to_sign = std::string(kAlgorithm) + '\n' + scope.amz_date + '\n' + credential_scope +
                       '\n' + Sha256Hex(sig.canonical_request);

  sig.signature = ComputeSignature(credentials.secret_access_key, scope, sig.string_to_sign);
  sig.authorization = std::string(kAlgorithm) + " Credential=" + credentials.access_key_id + '/' +
                      credential_scope + ", SignedHeaders=" + headers.signed_names +
                      ", Signature=" + sig.signature;
  return sig;
}

std::string UriEncode(std::string_view in, bool keep_slash) {
  std::string out;
  out.reserve(in.size());
  for (unsigned char c : in) {
    if (IsUnreserved(c) || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kEscapeDigits[c >> 4];
      out += kEscapeDigits[c & 0xf];
    }
  }
  return out;
}

std::string AddQueryParam(std::string query, std::string_view name, std::string_view value) {
  if (!query.empty()) query += '&';
  query += UriEncode(name, false);
  query += '=';
  query += UriEncode(value, false);
  return query;
}

std::string Sha256Hex(std::string_view data) { return ToHex(Sha256(data)); }

std::string AmzDate(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm utc{};
  gmtime_r(&secs, &utc);
  char buf[17];  // "20150830T123600Z" plus the terminator
  std::strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &utc);
  return buf;
}

std::optional<std::chrono::system_clock::time_point> ParseHttpDate(std::string_view value) {
  // strptime needs a terminated string; an IMF-fixdate is 29 characters.
  if (value.size() != 29 || !value.ends_with(" GMT")) return std::nullopt;
  std::string text(value);
  std::tm utc{};
  const char* end = strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &utc);
  if (end == nullptr || *end != '\0') return std::nullopt;
  std::time_t secs = timegm(&utc);
  if (secs == -1) return std::nullopt;
  return std::chrono::system_clock::from_time_t(secs);
}

}  // namespace lakecache
