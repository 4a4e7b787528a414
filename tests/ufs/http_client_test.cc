#include "ufs/http_client.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <thread>

#include "common/idle_trim.h"
#include "support/test_servers.h"

namespace lakecache {
namespace {

// Connections are reused, and closed once idle: a daemon between bursts holds no sockets.
TEST(HttpClientTest, KeepsAConnectionForTheNextRequestAndClosesItOnceIdle) {
  httplib::Server server;
  server.Get("/x", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("hello", "text/plain");
  });
  int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serving([&] { server.listen_after_bind(); });
  // bound and listening already: a request waits in the backlog until the loop accepts it

  HttpClient client(HttpClientOptions{});
  HttpRequest request;
  request.url = "http://127.0.0.1:" + std::to_string(port) + "/x";
  IoOptions options = IoOptions::WithTimeout(std::chrono::seconds(10));
  for (int i = 0; i < 2; ++i) {
    auto response = client.Execute(request, options);
    ASSERT_TRUE(response.ok()) << response.status().ToString();
    EXPECT_EQ(response->status, 200);
    EXPECT_EQ(response->body, "hello");
    EXPECT_EQ(client.idle_connections(), 1u);  // the one connection, reused
  }
  RunIdleTrims();  // the client's trim closes what is idle a minute or more: not this one
  EXPECT_EQ(client.idle_connections(), 1u);
  client.CloseIdle(std::chrono::seconds(0));
  EXPECT_EQ(client.idle_connections(), 0u);
  auto after = client.Execute(request, options);  // a new connection
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->body, "hello");

  server.stop();
  serving.join();
}

}  // namespace
}  // namespace lakecache
