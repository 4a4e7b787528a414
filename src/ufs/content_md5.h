// MD5 digests as S3 uses them: Content-MD5 headers (base64) and ETags (lowercase hex).
//
// Pure functions over OpenSSL, thread-safe. MD5 here guards against damage on the way, not
// against an attacker.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>

namespace lakecache {

using Md5Digest = std::array<unsigned char, 16>;

Md5Digest Md5(std::span<const char> data);

// The Content-MD5 header value of a body: base64 of its digest.
std::string Md5Base64(std::span<const char> data);

// "9e107d9d372bb6826bd81d3542a419d6"
std::string Md5Hex(std::span<const char> data);

// Parses 32 hex digits (either case) into `out`; false when `hex` is anything else.
bool ParseMd5Hex(std::string_view hex, Md5Digest* out);

}  // namespace lakecache
