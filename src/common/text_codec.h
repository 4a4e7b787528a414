// TextCodec: how our line- and field-based text formats write a character that would end a line
// or a field, and read it back. One codec with one spelling per format, each kept byte for byte
// (what older processes wrote must still read): a backslash and the character (the mount holder's
// wire, libfuse's -o values), '%' and two hex digits (the upload registry), a backslash and three
// octal digits (the kernel's /proc/self/mountinfo). The escape character itself is always escaped.
// Unescape(Escape(text)) == text; Unescape keeps a malformed escape as it is written. Stateless.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace lakecache {

class TextCodec {
 public:
  // '\' then the character, a newline as "\n" (and read back so); `specials` besides '\'.
  static constexpr TextCodec Backslash(std::string_view specials) {
    return TextCodec(Form::kBackslash, specials);
  }
  // '%' then two upper-case hex digits (read back in either case); `specials` besides '%'.
  static constexpr TextCodec PercentHex(std::string_view specials) {
    return TextCodec(Form::kPercentHex, specials);
  }
  // '\' then three octal digits; `specials` besides '\'.
  static constexpr TextCodec Octal(std::string_view specials) {
    return TextCodec(Form::kOctal, specials);
  }

  std::string Escape(std::string_view text) const;
  std::string Unescape(std::string_view text) const;

 private:
  enum class Form { kBackslash, kPercentHex, kOctal };
  constexpr TextCodec(Form form, std::string_view specials) : form_(form), specials_(specials) {}
  bool Special(char c) const;
  // The byte an escape at the start of `text` stands for and how many bytes it takes; nullopt
  // when `text` does not start with a well-formed escape.
  std::optional<std::pair<char, size_t>> Decode(std::string_view text) const;

  Form form_;
  std::string_view specials_;
};

// Bytes as lower-case hex digits, two per byte, and back; nullopt for what is not such hex.
std::string HexEncode(std::string_view bytes);
std::optional<std::string> HexDecode(std::string_view hex);

}  // namespace lakecache
