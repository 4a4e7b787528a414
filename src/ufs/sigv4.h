// AWS Signature Version 4 request signing (as used by S3 and OSS's S3-compatible API).
//
// Pure functions over a request description; no I/O, thread-safe. The caller adds the headers that
// must be signed (host, x-amz-date, x-amz-content-sha256, x-amz-security-token) before signing and
// then sends exactly the path and query it signed. Follows the published test suite, including its
// path normalisation cases (off for S3, which signs the path as sent). The path is never encoded a
// second time, as S3 wants; other services' double encoding of path segments is not done.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/secret.h"

namespace lakecache {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct SigV4Request {
  std::string method;        // "GET"
  std::string path;          // as sent on the wire, already URI-encoded: "/bucket/my%20key"
  std::string query;         // as sent on the wire, without '?': "list-type=2&prefix=a%2Fb";
                             // '+' is a literal plus, not a space
  HeaderList headers;        // names in any case; repeated names allowed
  std::string payload_hash;  // lowercase hex SHA-256 of the body, or "UNSIGNED-PAYLOAD"
};

struct SigV4Credentials {
  std::string access_key_id;
  Secret secret_access_key;
};

struct SigV4Scope {
  std::string region;    // "us-east-1"
  std::string service;   // "s3"
  std::string amz_date;  // "20150830T123600Z", the same value as the x-amz-date header
};

struct SigV4Signature {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signature;      // lowercase hex
  std::string authorization;  // the full Authorization header value
};

// Signs `request`. When normalize_path is set, "." and ".." segments and repeated slashes are
// removed from the path before signing (non-S3 services).
SigV4Signature SignV4(const SigV4Request& request, const SigV4Credentials& credentials,
                      const SigV4Scope& scope, bool normalize_path = false);

// RFC 3986 percent-encoding as SigV4 wants it: unreserved characters (A-Z a-z 0-9 - _ . ~) stay,
// every other byte becomes %XX (uppercase). '/' stays when keep_slash is true (object key paths).
std::string UriEncode(std::string_view in, bool keep_slash);

// `query` with "name=value" appended, both UriEncoded, '&'-separated.
std::string AddQueryParam(std::string query, std::string_view name, std::string_view value);

std::string Sha256Hex(std::string_view data);

// "20150830T123600Z" for the given time (UTC).
std::string AmzDate(std::chrono::system_clock::time_point t);

// The time of an HTTP Date header in its one current form (RFC 9110's IMF-fixdate, "Sun, 06 Nov
// 1994 08:49:37 GMT"); nullopt for anything else.
std::optional<std::chrono::system_clock::time_point> ParseHttpDate(std::string_view value);

}  // namespace lakecache
