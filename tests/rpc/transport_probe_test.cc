// What speaks at an address (rpc/transport_probe.h), against real gRPC servers on loopback, plain
// and TLS, and the hints a MasterSet gives a client of the other kind.
#include "rpc/transport_probe.h"

#include <grpcpp/server.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "rpc/auth.h"
#include "rpc/credentials_dir.h"
#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"
#include "rpc/master_set.h"
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
      tls = ServerTls(credentials + "/tls.key", credentials + "/tls.crt", credentials + "/ca.crt",
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
  void SetUp() override { ASSERT_TRUE(MakeCredentials(credentials_).ok()); }

  testing::TempDir tmp_;
  std::string credentials_ = tmp_.path() + "/creds";
};

TEST_F(TransportProbeTest, TellsPlainTextFromTlsFromSilenceFromNothing) {
  Server plain;
  Server tls(credentials_);
  auto silent = testing::SilentListener::Start();
  ASSERT_TRUE(silent.ok());
  EXPECT_EQ(ProbeServer(plain.address(), kProbe), ProbeResult::kPlainText);
  EXPECT_EQ(ProbeServer(tls.address(), kProbe), ProbeResult::kTls);
  EXPECT_EQ(ProbeServer((*silent)->address(), milliseconds(300)), ProbeResult::kSilent);
  std::string nowhere = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  EXPECT_EQ(ProbeServer(nowhere, kProbe), ProbeResult::kUnreachable);
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

}  // namespace
}  // namespace lakecache::rpc
