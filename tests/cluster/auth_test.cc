// Every method of every service, called with every wrong credential, is refused; each role may
// call what it should; a rogue worker can neither join without the worker role nor take another
// worker's id; claimed capacities are capped; certificates rotate under readers.
#include <google/protobuf/descriptor.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "cluster_client/cluster_client.h"
#include "cluster_client/cluster_store.h"
#include "master/master_server.h"
#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"
#include "security/auth.h"
#include "security/credentials_dir.h"
#include "security/x509.h"
#include "support/slowdown.h"
#include "support/test_servers.h"
#include "support/wait_for.h"
#include "worker/worker_server.h"

namespace lakecache {
namespace {

using security::Role;
using testing::TempDir;

constexpr uint64_t kBlock = 4096;
constexpr uint64_t kMaxCapacity = 64ull << 20;

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Who may call each method. A method of the protocol missing here fails the test: every new
// method must say who may call it.
const std::map<std::string, security::RoleSet>& Policy() {
  static const std::map<std::string, security::RoleSet> policy = {
      {"lakecache.rpc.MasterService.Register", security::Roles(Role::kWorker)},
      {"lakecache.rpc.MasterService.Heartbeat", security::Roles(Role::kWorker)},
      {"lakecache.rpc.MasterService.IssueCertificate", security::Roles(Role::kWorker)},
      {"lakecache.rpc.MasterService.GetClusterView",
       security::Roles(Role::kClient, Role::kAdmin, Role::kWorker)},
      {"lakecache.rpc.MasterService.GetNamespaces", security::Roles(Role::kClient, Role::kAdmin)},
      {"lakecache.rpc.MasterService.ListDir", security::Roles(Role::kClient, Role::kAdmin)},
      {"lakecache.rpc.MasterService.Stat", security::Roles(Role::kClient, Role::kAdmin)},
      {"lakecache.rpc.MasterService.NoteWrite", security::Roles(Role::kClient)},
      {"lakecache.rpc.WorkerService.ReadBlock", security::Roles(Role::kClient)},
      {"lakecache.rpc.WorkerService.LocateBlock", security::Roles(Role::kClient)},
      {"lakecache.rpc.WorkerService.Prefetch", security::Roles(Role::kMaster, Role::kClient)},
      {"lakecache.rpc.WorkerService.Stats", security::Roles(Role::kMaster, Role::kAdmin)},
      {"lakecache.rpc.WorkerService.Free", security::Roles(Role::kMaster)},
      {"lakecache.rpc.WorkerService.LoadBlocks", security::Roles(Role::kMaster)},
      {"lakecache.rpc.WorkerService.WriteBody", security::Roles(Role::kClient)},
      {"lakecache.rpc.WorkerService.WriteCall", security::Roles(Role::kClient)},
      {"lakecache.rpc.AdminService.Hello", security::Roles(Role::kAdmin)},
      {"lakecache.rpc.AdminService.Load", security::Roles(Role::kAdmin)},
      {"lakecache.rpc.AdminService.GetReport", security::Roles(Role::kAdmin)},
      {"lakecache.rpc.AdminService.FreePath", security::Roles(Role::kAdmin)},
      {"lakecache.rpc.AdminService.StatPath", security::Roles(Role::kAdmin)},
  };
  return policy;
}

class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(security::MakeCredentials(creds_.path()).ok());
    ASSERT_TRUE(security::MakeCredentials(other_.path()).ok());
    std::filesystem::create_directories(data_.path() + "/dir");
    ASSERT_TRUE(testing::WriteFile(data_.path() + "/dir/a.bin", std::string(3 * kBlock, 'x')).ok());
    config_.namespaces["lake"] = testing::LocalNamespace("lake", data_.path(), kBlock);
    config_.cluster.heartbeat_interval = std::chrono::milliseconds(100);
    config_.cluster.heartbeat_timeout = std::chrono::milliseconds(600) * testing::kSlowdown;
    config_.cluster.max_worker_capacity = kMaxCapacity;
    folder_ = creds_.path();
    StartMaster();
  }

  void StartMaster() {
    MasterOptions options;
    options.listen = "127.0.0.1:0";
    options.store = store_options_;
    options.credentials = folder_;
    auto master = MasterServer::Start(config_, options);
    ASSERT_TRUE(master.ok()) << master.status().ToString();
    master_ = std::move(*master);
  }

  void StartWorker(const std::string& disk = "") {
    Config config = config_;
    config.cache.memory_capacity = 16 << 20;
    if (!disk.empty()) config.cache.disks.push_back({disk, 64 << 20, 0, 0});
    WorkerOptions options;
    options.master = master_->address();
    options.store = store_options_;
    options.credentials = folder_;
    auto worker = WorkerServer::Start(config, options);
    ASSERT_TRUE(worker.ok()) << worker.status().ToString();
    workers_.push_back(std::move(*worker));
  }

  std::string Token(Role role, const TempDir& dir) const {
    return ReadText(dir.path() + "/" + std::string(security::RoleName(role)) + ".token");
  }

  // A TLS channel trusting `ca` and verifying `name`, presenting no token of its own.
  static std::shared_ptr<grpc::Channel> TlsChannel(const std::string& address,
                                                   const std::string& ca, const std::string& name) {
    auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(ca, 1);
    grpc::experimental::TlsChannelCredentialsOptions options;
    options.set_certificate_provider(provider);
    options.watch_root_certs();
    return rpc::OpenChannel(address, grpc::experimental::TlsCredentials(options), name);
  }

  // Calls `method` ("/pkg.Service/Method") with an empty request and `token` (empty: none).
  static grpc::Status Call(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                           const std::string& token) {
    grpc::GenericStub stub(channel);
    grpc::ClientContext ctx;
    rpc::SetTimeout(&ctx, std::chrono::seconds(5) * testing::kSlowdown);
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    grpc::Slice empty("", 0);  // an empty message (every field at its default)
    grpc::ByteBuffer request(&empty, 1), response;
    std::promise<grpc::Status> done;
    stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                   [&](grpc::Status s) { done.set_value(std::move(s)); });
    return done.get_future().get();
  }

  TempDir creds_, other_, data_, cache_;
  std::string folder_;  // the servers' credentials folder: creds_ unless a test moves them
  Config config_;
  StoreOptions store_options_;
  std::unique_ptr<MasterServer> master_;
  std::vector<std::unique_ptr<WorkerServer>> workers_;
};

TEST_F(AuthTest, EveryMethodRefusesEveryWrongCredential) {
  StartWorker();
  // The worker checks calls once the master has told it the token digests.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10) * testing::kSlowdown;
  while (!workers_[0]->registered() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(workers_[0]->registered());
  const std::string ca = creds_.path() + "/ca.crt";
  const std::string other_ca = other_.path() + "/ca.crt";
  const google::protobuf::FileDescriptor* file = rpc::WorkerInfo::descriptor()->file();
  ASSERT_NE(file, nullptr);
  std::set<std::string> seen;
  for (int s = 0; s < file->service_count(); ++s) {
    const google::protobuf::ServiceDescriptor* service = file->service(s);
    bool on_worker = service->name() == "WorkerService";
    std::string address = on_worker ? workers_[0]->address() : master_->address();
    std::string name =
        on_worker ? security::WorkerTlsName(workers_[0]->id()) : security::kMasterTlsName;
    auto plain = rpc::OpenChannel(address);
    auto tls = TlsChannel(address, ca, name);
    auto foreign = TlsChannel(address, other_ca, name);
    for (int m = 0; m < service->method_count(); ++m) {
      const google::protobuf::MethodDescriptor* method = service->method(m);
      std::string full = method->full_name();
      seen.insert(full);
      auto policy = Policy().find(full);
      ASSERT_NE(policy, Policy().end()) << full << " has no access policy in this test";
      std::string path = "/" + service->full_name() + "/" + method->name();
      SCOPED_TRACE(full);

      // Plain text to a TLS port: no HTTP/2 exchange at all.
      grpc::Status st = Call(plain, path, Token(Role::kAdmin, creds_));
      EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
      // Another cluster's CA: the handshake fails.
      st = Call(foreign, path, Token(Role::kAdmin, other_));
      EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
      // The right CA but no token, or another cluster's token.
      st = Call(tls, path, "");
      EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
      EXPECT_NE(st.error_message().find("role"), std::string::npos) << st.error_message();
      st = Call(tls, path, Token(Role::kClient, other_));
      EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
      // Each role: refused unless the policy lets it call.
      for (Role role : {Role::kWorker, Role::kMaster, Role::kClient, Role::kAdmin}) {
        std::string token = Token(role, creds_);
        st = Call(tls, path, token);
        EXPECT_EQ(st.error_message().find(token), std::string::npos) << "the token leaked";
        bool allowed = (policy->second & security::Roles(role)) != 0;
        if (allowed) {
          EXPECT_EQ(st.error_message().find("needs the"), std::string::npos)
              << security::RoleName(role) << ": " << st.error_message();
        } else {
          EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED)
              << security::RoleName(role) << ": " << st.error_message();
          EXPECT_NE(st.error_message().find("is the " + std::string(security::RoleName(role)) +
                                            " role's"),
                    std::string::npos)
              << st.error_message();
        }
      }
    }
  }
  EXPECT_EQ(seen.size(), Policy().size()) << "a method in the policy is gone from the protocol";
}

// A worker credential without the worker's own key cannot speak for it: Register and Heartbeat
// under a live worker's id are refused, with or without a certificate of one's own, and the
// master's view keeps the real worker.
TEST_F(AuthTest, ARogueWorkerCannotRegisterOrTakeOverAnId) {
  StartWorker();
  const std::string victim = workers_[0]->id();
  const std::string real_address = workers_[0]->address();
  auto view_address = [&]() -> std::string {
    auto channel = security::MasterChannel(
        master_->address(),
        security::ClusterCredentials::Open(creds_.path(), Role::kAdmin, "t").value().get());
    auto stub = rpc::MasterService::NewStub(channel);
    grpc::ClientContext ctx;
    rpc::ClusterView view;
    EXPECT_TRUE(stub->GetClusterView(&ctx, rpc::ClusterViewRequest(), &view).ok());
    for (const auto& w : view.workers()) {
      if (w.id() == victim) return w.address();
    }
    return "";
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10) * testing::kSlowdown;
  while (view_address().empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(view_address(), real_address);

  rpc::WorkerInfo claim;
  claim.set_id(victim);
  claim.set_address("127.0.0.1:1");
  claim.set_capacity_bytes(1ull << 50);
  rpc::RegisterRequest req;
  *req.mutable_worker() = claim;
  rpc::RegisterResponse resp;

  // No worker token at all: the bootstrap is refused before anything is signed.
  {
    auto stub = rpc::MasterService::NewStub(
        TlsChannel(master_->address(), creds_.path() + "/ca.crt", security::kMasterTlsName));
    grpc::ClientContext ctx;
    rpc::CertificateRequest csr;
    csr.set_csr_pem(*security::MakeCsr(*security::GenerateKeyPem(), "x"));
    rpc::CertificateResponse cert;
    EXPECT_EQ(stub->IssueCertificate(&ctx, csr, &cert).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    grpc::ClientContext ctx2;
    EXPECT_EQ(stub->Register(&ctx2, req, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  auto worker_creds = security::ClusterCredentials::Open(creds_.path(), Role::kWorker, "t").value();
  // The worker token but no certificate.
  {
    auto stub = rpc::MasterService::NewStub(
        worker_creds->Channel(master_->address(), security::kMasterTlsName));
    grpc::ClientContext ctx;
    grpc::Status st = stub->Register(&ctx, req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
    EXPECT_NE(st.error_message().find("not the id of the certificate"), std::string::npos);
  }
  // The worker token and a certificate of its own: the master names it after its own key, even
  // when the request asks for the victim's name, and it cannot register as the victim.
  TempDir rogue;
  std::string key = *security::GenerateKeyPem();
  ASSERT_TRUE(security::WriteFileAtomically(rogue.path() + "/worker.key", key, 0600).ok());
  rpc::CertificateResponse issued;
  {
    auto stub = rpc::MasterService::NewStub(
        worker_creds->Channel(master_->address(), security::kMasterTlsName));
    grpc::ClientContext ctx;
    rpc::CertificateRequest csr;
    csr.set_csr_pem(*security::MakeCsr(key, security::WorkerTlsName(victim)));
    ASSERT_TRUE(stub->IssueCertificate(&ctx, csr, &issued).ok());
  }
  std::string own_id = security::WorkerIdFromFingerprint(*security::KeyFingerprint(key));
  EXPECT_EQ(issued.worker_id(), own_id);
  EXPECT_NE(own_id, victim);
  auto info = security::ParseCertificate(issued.certificate_pem());
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->dns_names, std::vector<std::string>{security::WorkerTlsName(own_id)});
  ASSERT_TRUE(
      security::WriteFileAtomically(rogue.path() + "/worker.crt", issued.certificate_pem(), 0644)
          .ok());
  auto stub = rpc::MasterService::NewStub(
      worker_creds->Channel(master_->address(), security::kMasterTlsName,
                            rogue.path() + "/worker.key", rogue.path() + "/worker.crt"));
  {
    grpc::ClientContext ctx;
    grpc::Status st = stub->Register(&ctx, req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
    rpc::HeartbeatRequest beat;
    *beat.mutable_worker() = claim;
    rpc::HeartbeatResponse beat_resp;
    grpc::ClientContext ctx2;
    EXPECT_EQ(stub->Heartbeat(&ctx2, beat, &beat_resp).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  EXPECT_EQ(view_address(), real_address);
  // Under its own id it joins (it holds the worker role), with its claimed 1 PiB cut to the bound.
  claim.set_id(own_id);
  *req.mutable_worker() = claim;
  grpc::ClientContext ctx;
  grpc::Status st = stub->Register(&ctx, req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_GT(resp.tokens_size(), 0);
  auto admin = security::ClusterCredentials::Open(creds_.path(), Role::kAdmin, "t").value();
  auto view_stub =
      rpc::MasterService::NewStub(security::MasterChannel(master_->address(), admin.get()));
  grpc::ClientContext vctx;
  rpc::ClusterView view;
  ASSERT_TRUE(view_stub->GetClusterView(&vctx, rpc::ClusterViewRequest(), &view).ok());
  bool found = false;
  for (const auto& w : view.workers()) {
    if (w.id() != own_id) continue;
    found = true;
    EXPECT_EQ(w.capacity_bytes(), kMaxCapacity);
  }
  EXPECT_TRUE(found);
}

// Worker certificates renewed every few seconds and the master's renewed by `lakecache cert
// --renew` (its files replaced), under readers: not one read fails, and new connections see the
// new certificates.
TEST_F(AuthTest, CertificatesRotateUnderReadersWithoutAFailedRead) {
  master_.reset();
  config_.cluster.worker_certificate_validity = std::chrono::seconds(10);
  StartMaster();
  StartWorker(cache_.path());
  auto client_creds = security::ClusterCredentials::Open(creds_.path(), Role::kClient, "t").value();
  ClusterClientOptions options;
  options.credentials = client_creds;
  options.short_circuit = false;  // every read over the network, through TLS
  auto client = ClusterClient::Connect(master_->address(), options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10) * testing::kSlowdown;
  while ((*client)->Workers().empty() && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE((*client)->RefreshView().ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ClusterNamespace ns;
  for (const ClusterNamespace& n : (*client)->namespaces()) ns = n;
  const std::string cert_path = cache_.path() + "/worker.crt";
  auto issued_at = [&] {
    return security::ParseCertificate(ReadText(cert_path)).value().not_after;
  };
  auto first_cert = issued_at();
  std::string master_cert = ReadText(creds_.path() + "/tls.crt");
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0}, failed{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      while (!stop) {
        // A fresh client each round: new TLS connections to the master and the worker.
        auto c = ClusterClient::Connect(master_->address(), options);
        if (!c.ok()) {
          ++failed;
          continue;
        }
        ClusterStore store(*c, ns);
        std::string buf(3 * kBlock, '\0');
        Result<size_t> n = store.Read("dir/a.bin", 0, std::span<char>(buf), {});
        if (!n.ok() || *n != buf.size() || buf != std::string(3 * kBlock, 'x')) {
          ++failed;
          ADD_FAILURE() << (n.ok() ? "wrong bytes" : n.status().ToString());
        }
        ++reads;
      }
    });
  }
  // Reads before the renewal, across the master's new certificate, and across the worker's (it
  // renews its own once the master's has changed, within seconds; later on two busy cores).
  EXPECT_TRUE(testing::WaitFor([&] { return reads >= 5; }));
  security::CredentialOptions renew;
  renew.renew = true;
  EXPECT_TRUE(security::MakeCredentials(creds_.path(), renew).ok());  // the master's certificate
  const int at_renewal = reads;
  EXPECT_TRUE(testing::WaitFor([&] { return reads >= at_renewal + 5; }));
  EXPECT_TRUE(testing::WaitFor([&] { return issued_at() > first_cert; }, std::chrono::minutes(1)));
  const int at_worker_renewal = reads;
  EXPECT_TRUE(testing::WaitFor([&] { return reads >= at_worker_renewal + 5; }));
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_GT(reads.load(), 10);
  EXPECT_GT(issued_at(), first_cert) << "the worker never renewed its certificate";
  EXPECT_NE(ReadText(creds_.path() + "/tls.crt"), master_cert);
}

// A worker restarted (same cache directory, same key and id) into another cluster does not serve
// the certificate of the old CA: it asks the new master for one and joins.
TEST_F(AuthTest, AWorkerMovedToAnotherClusterGetsANewCertificate) {
  StartWorker(cache_.path());
  std::string id = workers_[0]->id();
  workers_.clear();
  master_.reset();
  folder_ = other_.path();  // the other cluster's folder from here on
  StartMaster();
  StartWorker(cache_.path());
  EXPECT_EQ(workers_[0]->id(), id);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10) * testing::kSlowdown;
  while (!workers_[0]->registered() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(workers_[0]->registered());
  EXPECT_TRUE(*security::SignedBy(ReadText(cache_.path() + "/worker.crt"),
                                  ReadText(other_.path() + "/ca.crt")));
}

// A worker checks callers from the moment it serves, before it has registered: the digests came
// with its certificate, and a restarted worker keeps them beside its key.
TEST_F(AuthTest, AWorkerChecksCallersFromTheMomentItServes) {
  auto admin = security::ClusterCredentials::Open(folder_, Role::kAdmin, "t").value();
  for (int start = 0; start < 2; ++start) {  // a fresh key, then the kept certificate and digests
    StartWorker(cache_.path());
    auto stub = rpc::WorkerService::NewStub(
        security::WorkerChannel(workers_.back()->address(), workers_.back()->id(), admin.get()));
    grpc::ClientContext ctx;
    rpc::WorkerStats stats;
    grpc::Status st = stub->Stats(&ctx, rpc::WorkerStatsRequest(), &stats);
    EXPECT_TRUE(st.ok()) << start << ": " << st.error_message();
    workers_.clear();
  }
}

// A worker with credentials and a master without them: the worker does not start, and says what
// to check rather than only that the call timed out.
TEST_F(AuthTest, AWorkerWithCredentialsAndAPlainMasterSaysWhatToCheck) {
  master_.reset();
  MasterOptions plain;
  plain.listen = "127.0.0.1:0";
  plain.store = store_options_;
  auto master = MasterServer::Start(config_, plain);
  ASSERT_TRUE(master.ok()) << master.status().ToString();
  WorkerOptions options;
  options.master = (*master)->address();
  options.store = store_options_;
  options.credentials = folder_;
  options.bootstrap_wait = std::chrono::milliseconds(500) * testing::kSlowdown;
  Config config = config_;
  config.cache.memory_capacity = 16 << 20;
  auto worker = WorkerServer::Start(config, options);
  ASSERT_FALSE(worker.ok());
  EXPECT_NE(worker.status().message().find("no certificate from the master"), std::string::npos)
      << worker.status().message();
  EXPECT_NE(worker.status().message().find("with --credentials of the same CA"), std::string::npos)
      << worker.status().message();
}

}  // namespace
}  // namespace lakecache
