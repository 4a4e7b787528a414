#include "http/http_endpoint.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <string>

#include "support/test_servers.h"

namespace lakecache::rpc {
namespace {

TEST(HttpEndpointTest, ServesMetricsAndPages) {
  metrics::Registry registry;
  registry.GetCounter("lakecache_test_total", "Test").Add(2);
  auto endpoint =
      HttpEndpoint::Start({"127.0.0.1:0", ""}, &registry,
                          {{"/status.json", [] {
                              return HttpReply{200, "application/json", "{\"ok\":true}"};
                            }}});
  ASSERT_TRUE(endpoint.ok()) << endpoint.status().ToString();
  std::string address = (*endpoint)->address();
  int port = std::stoi(address.substr(address.rfind(':') + 1));
  httplib::Client client("127.0.0.1", port);
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("lakecache_test_total 2"), std::string::npos) << metrics->body;
  EXPECT_TRUE(metrics->get_header_value("Content-Type").starts_with("text/plain; version=0.0.4"));
  auto page = client.Get("/status.json");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->body, "{\"ok\":true}");
  auto missing = client.Get("/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

TEST(HttpEndpointTest, WithATokenEveryRequestMustPresentIt) {
  testing::TempDir dir("lakecache-http");
  std::string token_path = dir.path() + "/metrics.token";
  ASSERT_TRUE(testing::WriteFile(token_path, "lc_tok_0123456789\n").ok());
  metrics::Registry registry;
  auto endpoint = HttpEndpoint::Start({"127.0.0.1:0", token_path}, &registry);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status().ToString();
  std::string address = (*endpoint)->address();
  int port = std::stoi(address.substr(address.rfind(':') + 1));
  httplib::Client client("127.0.0.1", port);

  auto none = client.Get("/metrics");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_NE(none->get_header_value("WWW-Authenticate").find("Basic"), std::string::npos);
  EXPECT_EQ(none->body.find("lc_tok_"), std::string::npos) << "the token must never be shown";

  auto wrong = client.Get("/metrics", {{"Authorization", "Bearer lc_tok_wrong"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);

  auto bearer = client.Get("/metrics", {{"Authorization", "Bearer lc_tok_0123456789"}});
  ASSERT_TRUE(bearer);
  EXPECT_EQ(bearer->status, 200);

  client.set_basic_auth("anyone", "lc_tok_0123456789");
  auto basic = client.Get("/metrics");
  ASSERT_TRUE(basic);
  EXPECT_EQ(basic->status, 200);
}

TEST(HttpEndpointTest, BadAddressesAndTokenFilesAreClearErrors) {
  metrics::Registry registry;
  auto bad = HttpEndpoint::Start({"no-port", ""}, &registry);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("HOST:PORT"), std::string::npos);
  auto missing = HttpEndpoint::Start({"127.0.0.1:0", "/nonexistent/metrics.token"}, &registry);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/metrics.token"), std::string::npos);
  auto first = HttpEndpoint::Start({"127.0.0.1:0", ""}, &registry);
  ASSERT_TRUE(first.ok());
  auto taken = HttpEndpoint::Start({(*first)->address(), ""}, &registry);
  ASSERT_FALSE(taken.ok());
  EXPECT_NE(taken.status().message().find("cannot listen"), std::string::npos);
}

}  // namespace
}  // namespace lakecache::rpc
