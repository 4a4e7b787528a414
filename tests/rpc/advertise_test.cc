#include "rpc/advertise.h"

#include <gtest/gtest.h>

namespace lakecache::rpc {
namespace {

TEST(AdvertiseTest, HostPortFormsClientsCanDialAreAccepted) {
  for (const char* ok : {"10.0.0.5:7001", "node-3.example.com:7001", "[fd00::5]:7001",
                         "localhost:65535", "127.0.0.1:1"}) {
    EXPECT_TRUE(CheckAdvertiseAddress("--advertise", ok, false).ok()) << ok;
  }
  EXPECT_TRUE(CheckAdvertiseAddress("POD_IP", "10.0.0.5:0", true).ok());
}

TEST(AdvertiseTest, MalformedAddressesNameTheFlagAndWhatIsWrong) {
  struct Case {
    const char* address;
    const char* why;
  };
  for (const Case& c :
       {Case{"10.0.0.5", "the port is missing"}, Case{"[fd00::5]", "the port is missing"},
        Case{"fd00::5:7001", "an IPv6 address goes in brackets"},
        Case{"[fd00::zz]:7001", "is no IPv6 address"},
        Case{"0.0.0.0:7001", "0.0.0.0 is a wildcard"}, Case{"[::]:7001", "[::] is a wildcard"},
        Case{":7001", "the host is missing"}, Case{"a b:7001", "is no host name or IPv4 address"},
        Case{"10.0.0.5:0", "the port must be a number from 1 to 65535"},
        Case{"10.0.0.5:65536", "the port must be a number from 1 to 65535"},
        Case{"10.0.0.5:x", "the port must be a number from 1 to 65535"}}) {
    Status s = CheckAdvertiseAddress("--advertise", c.address, false);
    ASSERT_FALSE(s.ok()) << c.address;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(s.message().starts_with("--advertise: '" + std::string(c.address) + "'"))
        << s.message();
    EXPECT_NE(s.message().find(c.why), std::string::npos) << s.message();
  }
}

TEST(AdvertiseTest, PortZeroTakesTheBoundPortAndNoAdvertiseTheFallback) {
  EXPECT_EQ(AdvertisedAddress("10.0.0.5:0", "0.0.0.0:7123", "host:7123"), "10.0.0.5:7123");
  EXPECT_EQ(AdvertisedAddress("[fd00::5]:0", "[::]:7123", "host:7123"), "[fd00::5]:7123");
  EXPECT_EQ(AdvertisedAddress("10.0.0.5:80", "0.0.0.0:7123", "host:7123"), "10.0.0.5:80");
  EXPECT_EQ(AdvertisedAddress("", "0.0.0.0:7123", "host:7123"), "host:7123");
  EXPECT_EQ(HostOf("[::1]:7000"), "[::1]");
  EXPECT_EQ(PortOf("[::1]:7000"), "7000");
}

}  // namespace
}  // namespace lakecache::rpc
