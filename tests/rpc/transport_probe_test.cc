// What speaks at an address (rpc/transport_probe.h), against real gRPC servers on loopback, plain
// and TLS; the hints a MasterSet gives a client of the other kind; and a server's log line naming
// a client of the other kind (rpc/client_transport_check.h).
#include "rpc/transport_probe.h"

#include <arpa/inet.h>
#include <grpcpp/server.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "master_client/master_set.h"
#include "rpc/client_transport_check.h"
#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"
#include "security/auth.h"
#include "security/credentials_dir.h"
#include "support/test_servers.h"

namespace lakecache::rpc {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kProbe{5000};  // generous: a loopback probe takes milliseconds

class EmptyMaster final : public MasterService::Service {};

// A gRPC server on loopback, TLS with `credentials` (a `lakecache cert` folder) or plain.
class Server {
 public:
  explicit Server(const std::string& credentials = "") {
    std::shared_ptr<grpc::ServerCredentials> tls;
    if (!credentials.empty()) {
      tls = security::ServerTls(credentials + "/tls.key", credentials + "/tls.crt",
                                credentials + "/ca.crt",
                                /*verify_clients=*/false);
    }
    auto started = StartServer("127.0.0.1:0", {&service_}, tls);
    EXPECT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started->server);
    address_ = started->address;
  }
  ~Server() { server_->Shutdown(std::chrono::system_clock::now()); }
  const std::string& address() const { return address_; }

 private:
  EmptyMaster service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

class TransportProbeTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(security::MakeCredentials(credentials_).ok()); }

  testing::TempDir tmp_;
  std::string credentials_ = tmp_.path() + "/creds";
};

TEST_F(TransportProbeTest, TellsPlainTextFromTlsFromSilenceFromNothing) {
  Server plain;
  Server tls(credentials_);
  auto silent = testing::SilentListener::Start();
  ASSERT_TRUE(silent.ok());
  std::string nowhere = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  for (Transport first : {Transport::kPlainText, Transport::kTls}) {
    SCOPED_TRACE(first == Transport::kTls ? "asked over TLS first" : "asked in plain text first");
    EXPECT_EQ(ProbeServer(plain.address(), first, kProbe), ProbeResult::kPlainText);
    EXPECT_EQ(ProbeServer(tls.address(), first, kProbe), ProbeResult::kTls);
    EXPECT_EQ(ProbeServer((*silent)->address(), first, milliseconds(300)), ProbeResult::kSilent);
    EXPECT_EQ(ProbeServer(nowhere, first, kProbe), ProbeResult::kUnreachable);
  }
}

TEST_F(TransportProbeTest, MismatchSaysWhatToPassOnlyToAClientOfTheOtherKind) {
  Server plain;
  Server tls(credentials_);
  std::string pass = TransportMismatch(tls.address(), Transport::kPlainText, kProbe);
  EXPECT_NE(pass.find("serves TLS"), std::string::npos) << pass;
  EXPECT_NE(pass.find("pass --credentials DIR"), std::string::npos) << pass;
  std::string drop = TransportMismatch(plain.address(), Transport::kTls, kProbe);
  EXPECT_NE(drop.find("serves plain text"), std::string::npos) << drop;
  EXPECT_NE(drop.find("drop --credentials"), std::string::npos) << drop;
  EXPECT_EQ(TransportMismatch(tls.address(), Transport::kTls, kProbe), "");
  EXPECT_EQ(TransportMismatch(plain.address(), Transport::kPlainText, kProbe), "");
}

// A plain-text client's calls to a TLS master fail at once with the hint (kInvalidArgument), and
// so does its wait for a connection, long before its deadline.
TEST_F(TransportProbeTest, MasterSetOfTheOtherTransportFailsAtOnceSayingWhatToPass) {
  Server tls(credentials_);
  MasterSet masters(
      {tls.address()}, [](const std::string& address) { return OpenChannel(address); },
      Transport::kPlainText);
  ClusterView view;
  Status call = masters.Call(
      [&](const MasterSet::Master& m, grpc::ClientContext* ctx) {
        return MasterService::NewStub(m.channel)->GetClusterView(ctx, ClusterViewRequest(), &view);
      },
      milliseconds(60000), std::chrono::system_clock::now() + std::chrono::minutes(2));
  EXPECT_EQ(call.code(), StatusCode::kInvalidArgument) << call.ToString();
  EXPECT_NE(call.message().find("master " + tls.address() + " serves TLS"), std::string::npos)
      << call.ToString();

  MasterSet again(
      {tls.address()}, [](const std::string& address) { return OpenChannel(address); },
      Transport::kPlainText);
  Status waited = again.WaitForAny(std::chrono::system_clock::now() + std::chrono::minutes(2));
  EXPECT_EQ(waited.code(), StatusCode::kInvalidArgument) << waited.ToString();
}

TEST(ClientTransportCheckTest, NamesAClientOfTheOtherKindOnly) {
  std::string plain_at_tls = ClientTransportMismatch("PRI", Transport::kTls, "10.0.0.7");
  EXPECT_EQ(plain_at_tls.rfind("a plain-text client at 10.0.0.7 called this TLS server: it needs "
                               "--credentials DIR",
                               0),
            0u)
      << plain_at_tls;
  std::string tls_at_plain =
      ClientTransportMismatch(std::string("\x16\x03\x01", 3), Transport::kPlainText, "10.0.0.7");
  EXPECT_EQ(tls_at_plain.rfind("a TLS client at 10.0.0.7 called this plain-text server", 0), 0u)
      << tls_at_plain;
  EXPECT_EQ(ClientTransportMismatch("PRI", Transport::kPlainText, "10.0.0.7"), "");
  EXPECT_EQ(ClientTransportMismatch(std::string("\x16\x03\x01", 3), Transport::kTls, "10.0.0.7"),
            "");
  EXPECT_EQ(ClientTransportMismatch("P", Transport::kTls, "10.0.0.7"), "");
}

// Sends HTTP/2's preface in plain text to `address` from 127.0.0.2 (an address no other test
// calls from, as the server's log is quiet about one it named lately) and keeps the connection
// until the server closes it.
void PlainTextHello(const std::string& address) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  from.sin_addr.s_addr = htonl(0x7f000002);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)), 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1))));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  ASSERT_EQ(::send(fd, preface.data(), preface.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(preface.size()));
  char buf[64];
  while (::recv(fd, buf, sizeof(buf), 0) > 0) {
  }
  ::close(fd);
}

// The server's log names a plain-text client of a TLS server, once for several connections (gRPC's
// own line names none).
TEST_F(TransportProbeTest, ATlsServerLogsAPlainTextClientOnceNamingIt) {
  auto out = std::make_shared<std::ostringstream>();
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(*out);
  auto before = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink));
  {
    Server tls(credentials_);
    for (int i = 0; i < 3; ++i) PlainTextHello(tls.address());
  }  // the server is shut down: every connection's check is done
  spdlog::default_logger()->flush();
  std::string log = out->str();
  spdlog::set_default_logger(before);
  std::string line = "a plain-text client at 127.0.0.2 called this TLS server";
  size_t first = log.find(line);
  EXPECT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find(line, first + 1), std::string::npos) << "more than once:\n" << log;
}

}  // namespace
}  // namespace lakecache::rpc
