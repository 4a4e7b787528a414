#include "common/units.h"

#include <gtest/gtest.h>

namespace lakecache {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

TEST(ParseByteSizeTest, BinaryAndDecimalUnits) {
  EXPECT_EQ(*ParseByteSize("4MiB"), 4194304u);
  EXPECT_EQ(*ParseByteSize("512M"), 512ull << 20);
  EXPECT_EQ(*ParseByteSize("1.5GiB"), 3ull << 29);
  EXPECT_EQ(*ParseByteSize("10GB"), 10'000'000'000ull);
  EXPECT_EQ(*ParseByteSize("64k"), 65536u);
  EXPECT_EQ(*ParseByteSize("2kB"), 2000u);
}

TEST(ParseByteSizeTest, BareNumberIsBytes) {
  EXPECT_EQ(*ParseByteSize("123"), 123u);
  EXPECT_EQ(*ParseByteSize(" 7B "), 7u);
}

TEST(ParseByteSizeTest, RejectsBadUnitAndText) {
  Result<uint64_t> bad_unit = ParseByteSize("4XB");
  ASSERT_FALSE(bad_unit.ok());
  EXPECT_EQ(bad_unit.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_unit.status().message().find("unit"), std::string::npos);
  EXPECT_FALSE(ParseByteSize("abc").ok());
  EXPECT_FALSE(ParseByteSize("").ok());
  EXPECT_FALSE(ParseByteSize("-1MiB").ok());
}

TEST(ParseDurationTest, Units) {
  EXPECT_EQ(*ParseDuration("30s"), seconds(30));
  EXPECT_EQ(*ParseDuration("5m"), minutes(5));
  EXPECT_EQ(*ParseDuration("250ms"), milliseconds(250));
  EXPECT_EQ(*ParseDuration("2h"), hours(2));
  EXPECT_EQ(*ParseDuration("1d"), hours(24));
  EXPECT_EQ(*ParseDuration("1.5s"), milliseconds(1500));
}

TEST(ParseDurationTest, BareZeroAllowedOtherBareNumbersRejected) {
  EXPECT_EQ(*ParseDuration("0"), milliseconds(0));
  Result<Duration> bare = ParseDuration("5");
  ASSERT_FALSE(bare.ok());
  EXPECT_NE(bare.status().message().find("'5'"), std::string::npos);
}

TEST(ParseDurationTest, CombinedUnitsRoundTripThroughFormat) {
  EXPECT_EQ(*ParseDuration("1h30m"), minutes(90));
  EXPECT_EQ(*ParseDuration("2m15s"), seconds(135));
  for (auto d : {milliseconds(250), milliseconds(90'000), milliseconds(5'400'000),
                 milliseconds(3'723'000)}) {
    Result<Duration> parsed = ParseDuration(FormatDuration(d));
    ASSERT_TRUE(parsed.ok()) << FormatDuration(d);
    EXPECT_EQ(*parsed, d) << FormatDuration(d);
  }
}

TEST(FormatByteSizeTest, InexactValuesStayExact) {
  EXPECT_EQ(FormatByteSize(1234567), "1234567B");
  EXPECT_EQ(*ParseByteSize(FormatByteSize(1234567)), 1234567u);
  EXPECT_EQ(FormatByteSize((4ull << 20) + 1024), "4097KiB");
}

TEST(ParseDurationTest, RejectsGarbage) {
  EXPECT_FALSE(ParseDuration("soon").ok());
  EXPECT_FALSE(ParseDuration("5 minutes").ok());
  EXPECT_FALSE(ParseDuration("-1s").ok());
}

TEST(FormatByteSizeTest, LargestReadableUnit) {
  EXPECT_EQ(FormatByteSize(4194304), "4MiB");
  EXPECT_EQ(FormatByteSize(123), "123B");
  EXPECT_EQ(FormatByteSize(3ull << 29), "1.5GiB");
  EXPECT_EQ(FormatByteSize(1ull << 40), "1TiB");
}

TEST(FormatByteSizeTest, RoundTripsThroughParse) {
  for (uint64_t bytes :
       {0ull, 1ull, 1023ull, 1024ull, 1536ull, 4ull << 20, 3ull << 29, 5ull << 40}) {
    Result<uint64_t> parsed = ParseByteSize(FormatByteSize(bytes));
    ASSERT_TRUE(parsed.ok()) << FormatByteSize(bytes);
    EXPECT_EQ(*parsed, bytes) << FormatByteSize(bytes);
  }
}

// Found by fuzz/config_fuzz: whole numbers went through a double, so sizes past 2^53 bytes and
// durations past 2^53 ms came back as other values, and a duration past 2^63 ms converted to
// int64 was undefined behaviour.
TEST(FormatByteSizeTest, WholeByteCountsPast2To53RoundTripExactly) {
  for (uint64_t bytes :
       {uint64_t{(1ull << 53) + 1}, uint64_t{2308721966198251875ull}, uint64_t{UINT64_MAX}}) {
    Result<uint64_t> parsed = ParseByteSize(FormatByteSize(bytes));
    ASSERT_TRUE(parsed.ok()) << FormatByteSize(bytes);
    EXPECT_EQ(*parsed, bytes) << FormatByteSize(bytes);
  }
  EXPECT_FALSE(ParseByteSize("18446744073709551616B").ok());
  EXPECT_FALSE(ParseByteSize("16777216TiB").ok());
}

TEST(ParseDurationTest, LongDurationsAreExactOrRefused) {
  for (int64_t ms : {(int64_t{1} << 53) + 1, int64_t{2106762374642054800},
                     int64_t{9007199254740999} * 1000, int64_t{INT64_MAX}}) {
    Result<Duration> parsed = ParseDuration(FormatDuration(Duration(ms)));
    ASSERT_TRUE(parsed.ok()) << FormatDuration(Duration(ms));
    EXPECT_EQ(parsed->count(), ms) << FormatDuration(Duration(ms));
  }
  for (const char* text : {"9223372036854775808ms", "106751991167301d", "99999999999999999999s"}) {
    Result<Duration> parsed = ParseDuration(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_NE(parsed.status().message().find("too long"), std::string::npos) << text;
  }
}

TEST(FormatDurationTest, Forms) {
  EXPECT_EQ(FormatDuration(seconds(30)), "30s");
  EXPECT_EQ(FormatDuration(minutes(5)), "5m");
  EXPECT_EQ(FormatDuration(milliseconds(250)), "250ms");
  EXPECT_EQ(FormatDuration(milliseconds(0)), "0s");
  EXPECT_EQ(FormatDuration(minutes(90)), "1h30m");
}

// Single-unit forms only: ParseDuration does not read compound forms such as "1h30m".
TEST(FormatDurationTest, SingleUnitFormsRoundTripThroughParse) {
  for (Duration d : {Duration(0), Duration(250), Duration(1500), Duration(seconds(30)),
                     Duration(minutes(5)), Duration(hours(3))}) {
    Result<Duration> parsed = ParseDuration(FormatDuration(d));
    ASSERT_TRUE(parsed.ok()) << FormatDuration(d);
    EXPECT_EQ(*parsed, d) << FormatDuration(d);
  }
}

}  // namespace
}  // namespace lakecache
