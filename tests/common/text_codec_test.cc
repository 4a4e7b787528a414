#include "common/text_codec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace lakecache {
namespace {

std::string AllBytes() {
  std::string out;
  for (int c = 0; c < 256; ++c) out += static_cast<char>(c);
  return out;
}

const std::vector<TextCodec>& Codecs() {
  static const std::vector<TextCodec> codecs = {
      TextCodec::Backslash("\n"), TextCodec::Backslash(","), TextCodec::PercentHex("\t\n\r"),
      TextCodec::Octal(" \t\n")};
  return codecs;
}

TEST(TextCodecTest, EveryCodecRoundTripsEveryByte) {
  std::vector<std::string> texts = {"", "plain", AllBytes(), "\\\\n%%25\\040", "end\\", "end%"};
  for (const TextCodec& codec : Codecs()) {
    for (const std::string& text : texts) EXPECT_EQ(codec.Unescape(codec.Escape(text)), text);
  }
}

// The spellings older processes wrote and read: the holder's wire, libfuse's -o values, the upload
// registry, the kernel's mountinfo.
TEST(TextCodecTest, EachSpellingIsTheOneOnDiskAndOnTheWire) {
  EXPECT_EQ(TextCodec::Backslash("\n").Escape("a\\b\nc,d\te"), "a\\\\b\\nc,d\te");
  EXPECT_EQ(TextCodec::Backslash(",").Escape("lakecache:cluster:a:7400,b\\c"),
            "lakecache:cluster:a:7400\\,b\\\\c");
  EXPECT_EQ(TextCodec::PercentHex("\t\n\r").Escape("a\tb%c\nd\re f"), "a%09b%25c%0Ad%0De f");
  EXPECT_EQ(TextCodec::Octal(" \t\n").Escape("/mnt/a b\\c\td"), "/mnt/a\\040b\\134c\\011d");
}

TEST(TextCodecTest, MalformedEscapesAreKeptAsWritten) {
  EXPECT_EQ(TextCodec::Backslash("\n").Unescape("lone\\"), "lone\\");
  EXPECT_EQ(TextCodec::Backslash("\n").Unescape("\\x\\n"), "x\n");  // any character after '\'
  EXPECT_EQ(TextCodec::PercentHex("\t").Unescape("%G1%4%"), "%G1%4%");
  EXPECT_EQ(TextCodec::PercentHex("\t").Unescape("%4a%4A"), "JJ");  // either case
  EXPECT_EQ(TextCodec::Octal(" ").Unescape("\\09\\04\\"), "\\09\\04\\");
  EXPECT_EQ(TextCodec::Octal(" ").Unescape("a\\040"), "a ");
}

TEST(HexTest, RoundTripsAndRefusesWhatIsNotHex) {
  EXPECT_EQ(HexEncode(std::string("\x00\x1f\xff", 3)), "001fff");
  EXPECT_EQ(HexDecode(HexEncode(AllBytes())), AllBytes());
  EXPECT_EQ(HexDecode("0A0b"), std::string("\x0a\x0b"));
  EXPECT_FALSE(HexDecode("abc").has_value());
  EXPECT_FALSE(HexDecode("zz").has_value());
  EXPECT_EQ(HexDecode(""), std::string());
}

}  // namespace
}  // namespace lakecache
