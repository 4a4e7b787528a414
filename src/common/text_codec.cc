#include "common/text_codec.h"

namespace lakecache {
namespace {

constexpr char kLowerHex[] = "0123456789abcdef";
constexpr char kUpperHex[] = "0123456789ABCDEF";

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

bool OctalDigit(char c) { return c >= '0' && c <= '7'; }

}  // namespace

bool TextCodec::Special(char c) const {
  char escape = form_ == Form::kPercentHex ? '%' : '\\';
  return c == escape || specials_.find(c) != std::string_view::npos;
}

std::string TextCodec::Escape(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (!Special(c)) {
      out += c;
      continue;
    }
    auto byte = static_cast<unsigned char>(c);
    switch (form_) {
      case Form::kBackslash:
        out += '\\';
        out += c == '\n' ? 'n' : c;
        break;
      case Form::kPercentHex:
        out += '%';
        out += kUpperHex[byte >> 4];
        out += kUpperHex[byte & 15];
        break;
      case Form::kOctal:
        out += '\\';
        out += static_cast<char>('0' + (byte >> 6));
        out += static_cast<char>('0' + ((byte >> 3) & 7));
        out += static_cast<char>('0' + (byte & 7));
        break;
    }
  }
  return out;
}

std::optional<std::pair<char, size_t>> TextCodec::Decode(std::string_view text) const {
  switch (form_) {
    case Form::kBackslash:
      if (text.size() < 2 || text[0] != '\\') return std::nullopt;
      return std::pair<char, size_t>(text[1] == 'n' ? '\n' : text[1], 2);
    case Form::kPercentHex: {
      if (text.size() < 3 || text[0] != '%') return std::nullopt;
      int high = HexDigit(text[1]), low = HexDigit(text[2]);
      if (high < 0 || low < 0) return std::nullopt;
      return std::pair<char, size_t>(static_cast<char>(high * 16 + low), 3);
    }
    case Form::kOctal:
      if (text.size() < 4 || text[0] != '\\' || !OctalDigit(text[1]) || !OctalDigit(text[2]) ||
          !OctalDigit(text[3])) {
        return std::nullopt;
      }
      return std::pair<char, size_t>(
          static_cast<char>((text[1] - '0') * 64 + (text[2] - '0') * 8 + (text[3] - '0')), 4);
  }
  return std::nullopt;
}

std::string TextCodec::Unescape(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (auto decoded = Decode(text.substr(i))) {
      out += decoded->first;
      i += decoded->second;
    } else {
      out += text[i++];
    }
  }
  return out;
}

std::string HexEncode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kLowerHex[c >> 4];
    out += kLowerHex[c & 15];
  }
  return out;
}

std::optional<std::string> HexDecode(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int high = HexDigit(hex[i]), low = HexDigit(hex[i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    out += static_cast<char>(high << 4 | low);
  }
  return out;
}

}  // namespace lakecache
