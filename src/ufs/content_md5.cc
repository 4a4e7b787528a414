#include "ufs/content_md5.h"

#include <openssl/evp.h>

#include <cstdlib>

namespace lakecache {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Md5Digest Md5(std::span<const char> data) {
  Md5Digest out{};
  unsigned int len = 0;
  // Fails only when OpenSSL itself is broken; a wrong digest would fail every upload later.
  if (EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_md5(), nullptr) != 1) {
    std::abort();
  }
  return out;
}

std::string Md5Base64(std::span<const char> data) {
  Md5Digest digest = Md5(data);
  unsigned char out[32] = {};  // 4 * ceil(16 / 3) + NUL
  int n = EVP_EncodeBlock(out, digest.data(), static_cast<int>(digest.size()));
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

std::string Md5Hex(std::span<const char> data) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : Md5(data)) {
    out += kDigits[b >> 4];
    out += kDigits[b & 0xf];
  }
  return out;
}

bool ParseMd5Hex(std::string_view hex, Md5Digest* out) {
  if (hex.size() != 2 * out->size()) return false;
  for (size_t i = 0; i < out->size(); ++i) {
    int hi = HexValue(hex[2 * i]);
    int lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  return true;
}

}  // namespace lakecache
