#include "membership/etcd_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <optional>
#include <thread>

#include "support/etcd_cluster.h"
#include "support/wait_for.h"

namespace lakecache {
namespace {

using testing::EtcdCluster;
using Clock = std::chrono::steady_clock;

TEST(EtcdEndpointsTest, ParsesListsAndRefusesWhatIsNotAnEndpoint) {
  auto ok = ParseEtcdEndpoints("--etcd", "127.0.0.1:2379,http://etcd-1:2379");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(*ok, (std::vector<std::string>{"127.0.0.1:2379", "http://etcd-1:2379"}));
  for (const char* bad : {"", "etcd", "etcd:", ":2379", "etcd:23x9", "ftp://etcd:2379", "a:1,,b:2",
                          "https://a:1,http://b:2"}) {
    auto r = ParseEtcdEndpoints("--etcd", bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--etcd"), std::string::npos) << r.status().message();
  }
}

class EtcdClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cluster = EtcdCluster::Start(3);
    ASSERT_TRUE(cluster.ok()) << cluster.status().message();
    etcd_ = std::move(cluster).value();
  }

  std::shared_ptr<EtcdClient> Connect(const std::string& endpoints, EtcdOptions options = {}) {
    auto list = ParseEtcdEndpoints("--etcd", endpoints);
    EXPECT_TRUE(list.ok());
    options.endpoints = *list;
    options.timeout = std::chrono::milliseconds(2000);
    auto client = EtcdClient::Connect(std::move(options));
    EXPECT_TRUE(client.ok()) << client.status().message();
    return client.ok() ? *client : nullptr;
  }

  // Collects what a watch reports.
  struct Seen {
    Mutex mu;
    CondVar cv;
    std::map<std::string, std::string> keys GUARDED_BY(mu);
    int snapshots GUARDED_BY(mu) = 0;
    int disconnects GUARDED_BY(mu) = 0;
    int reconnects GUARDED_BY(mu) = 0;
    int64_t revision GUARDED_BY(mu) = 0;

    void Apply(const EtcdWatchUpdate& u) {
      MutexLock lock(&mu);
      if (u.snapshot) {
        ++snapshots;
        keys.clear();
        for (const auto& kv : u.kvs) keys[kv.key] = kv.value;
      }
      for (const auto& e : u.events) {
        if (e.deleted) {
          keys.erase(e.kv.key);
        } else {
          keys[e.kv.key] = e.kv.value;
        }
      }
      revision = u.revision;
      cv.SignalAll();
    }
    void Connected(bool up) {
      MutexLock lock(&mu);
      ++(up ? reconnects : disconnects);
      cv.SignalAll();
    }
    // Waits until `pred` holds (under mu) or 30 s pass. Unchecked: the analysis cannot tell that
    // the predicates' `seen.mu` is this `mu`.
    template <typename Pred>
    bool WaitFor(Pred pred) NO_THREAD_SAFETY_ANALYSIS {
      MutexLock lock(&mu);
      auto deadline = Clock::now() + std::chrono::seconds(30);
      while (!pred()) {
        if (Clock::now() > deadline) return false;
        cv.WaitUntil(&mu, Clock::now() + std::chrono::milliseconds(100));
      }
      return true;
    }
  };

  std::unique_ptr<EtcdWatch> Watch(const std::shared_ptr<EtcdClient>& client, Seen& seen,
                                   const std::string& prefix, int64_t revision) {
    return std::make_unique<EtcdWatch>(
        client, prefix, revision, [&seen](const EtcdWatchUpdate& u) { seen.Apply(u); },
        [&seen](bool up, const Status&) { seen.Connected(up); });
  }

  std::unique_ptr<EtcdCluster> etcd_;
};

TEST_F(EtcdClientTest, KeysTransactionsAndLeases) {
  auto client = Connect(etcd_->endpoints());
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->Put("/t/a", "1").ok());
  ASSERT_TRUE(client->Put("/t/b", "2").ok());
  ASSERT_TRUE(client->Put("/u/c", "3").ok());
  auto prefix = client->GetPrefix("/t/");
  ASSERT_TRUE(prefix.ok()) << prefix.status().message();
  ASSERT_EQ(prefix->kvs.size(), 2u);
  EXPECT_EQ(prefix->kvs[0].key, "/t/a");
  EXPECT_EQ(prefix->kvs[1].value, "2");
  EXPECT_GT(prefix->revision, 0);
  auto missing = client->Get("/t/none");
  ASSERT_TRUE(missing.ok());
  EXPECT_TRUE(missing->kvs.empty());

  auto granted = client->Grant(std::chrono::seconds(5));
  ASSERT_TRUE(granted.ok()) << granted.status().message();
  EXPECT_GE(granted->ttl, std::chrono::seconds(5));
  std::optional<int64_t> lease = granted->id;
  auto created = client->CreateIfAbsent("/t/leader", "me", *lease);
  ASSERT_TRUE(created.ok());
  EXPECT_TRUE(*created);
  auto again = client->CreateIfAbsent("/t/leader", "you", *lease);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
  auto leader = client->Get("/t/leader");
  ASSERT_TRUE(leader.ok());
  ASSERT_EQ(leader->kvs.size(), 1u);
  EXPECT_EQ(leader->kvs[0].value, "me");
  EXPECT_EQ(leader->kvs[0].lease, *lease);

  auto left = client->KeepAlive(*lease);
  ASSERT_TRUE(left.ok()) << left.status().message();
  EXPECT_GT(*left, 0);

  auto wrong = client->DeleteIfCreated("/t/leader", leader->kvs[0].create_revision + 1);
  ASSERT_TRUE(wrong.ok());
  EXPECT_FALSE(*wrong);
  auto right = client->DeleteIfCreated("/t/leader", leader->kvs[0].create_revision);
  ASSERT_TRUE(right.ok());
  EXPECT_TRUE(*right);

  ASSERT_TRUE(client->Put("/t/held", "x", *lease).ok());
  ASSERT_TRUE(client->Revoke(*lease).ok());
  EXPECT_TRUE(client->Get("/t/held")->kvs.empty());
  auto expired = client->KeepAlive(*lease);
  ASSERT_FALSE(expired.ok());
  EXPECT_EQ(expired.status().code(), StatusCode::kNotFound) << expired.status().message();

  ASSERT_TRUE(client->Delete("/t/a").ok());
  EXPECT_TRUE(client->Get("/t/a")->kvs.empty());
}

TEST_F(EtcdClientTest, AKeyUnderALeaseGoesWhenNobodyKeepsItAlive) {
  auto client = Connect(etcd_->endpoints());
  ASSERT_TRUE(client);
  auto granted = client->Grant(std::chrono::seconds(2));
  ASSERT_TRUE(granted.ok());
  std::optional<int64_t> lease = granted->id;
  ASSERT_TRUE(client->Put("/w/1", "worker", *lease).ok());
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!client->Get("/w/1")->kvs.empty() && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(client->Get("/w/1")->kvs.empty());
}

// Puts until a call succeeds (30 s at most): while the members elect a new leader calls may fail,
// each within its timeouts and naming the member, none hanging.
void PutUntilItSucceeds(EtcdClient& client, const std::string& key, const std::string& value) {
  auto start = Clock::now();
  for (;;) {
    auto call = Clock::now();
    auto put = client.Put(key, value);
    EXPECT_LT(Clock::now() - call, testing::kWaitTimeout);  // only a hang goes past this
    if (put.ok()) return;
    EXPECT_NE(put.status().message().find("etcd 127.0.0.1:"), std::string::npos)
        << put.status().message();
    ASSERT_LT(Clock::now() - start, std::chrono::seconds(30)) << put.status().message();
  }
}

TEST_F(EtcdClientTest, CallsMoveToAnotherMemberWhenOneIsKilledOrStopsAnswering) {
  auto client = Connect(etcd_->endpoints());
  ASSERT_TRUE(client);
  auto member_of = [&](const std::string& endpoint) {
    for (int m = 0; m < 3; ++m) {
      if (etcd_->endpoint(m) == endpoint) return m;
    }
    ADD_FAILURE() << endpoint << " is none of the members";
    return 0;
  };
  // The member the client talks to (the first that answered it: on a loaded machine not always
  // the first listed) is killed.
  const std::string first = client->endpoint();
  const int killed = member_of(first);
  etcd_->Kill(killed);
  PutUntilItSucceeds(*client, "/k", "after kill");
  EXPECT_NE(client->endpoint(), first);
  ASSERT_TRUE(etcd_->Restart(killed).ok());

  // A member that stops answering (SIGSTOP): calls move on after their timeout.
  std::string stuck = client->endpoint();
  int stuck_member = member_of(stuck);
  etcd_->Pause(stuck_member);
  PutUntilItSucceeds(*client, "/k", "after stop");
  EXPECT_NE(client->endpoint(), stuck);
  etcd_->Resume(stuck_member);
  auto back = client->Get("/k");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->kvs.size(), 1u);
  EXPECT_EQ(back->kvs[0].value, "after stop");
}

TEST_F(EtcdClientTest, AWatchSeesEveryChangeAndResumesOnAnotherMemberWithoutLosingOne) {
  auto client = Connect(etcd_->endpoints());
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->Put("/view/w0", "a").ok());
  auto listed = client->GetPrefix("/view/");
  ASSERT_TRUE(listed.ok());
  Seen seen;
  {
    MutexLock lock(&seen.mu);
    for (const auto& kv : listed->kvs) seen.keys[kv.key] = kv.value;
  }
  auto watch = Watch(client, seen, "/view/", listed->revision);
  ASSERT_TRUE(client->Put("/view/w1", "b").ok());
  ASSERT_TRUE(client->Delete("/view/w0").ok());
  ASSERT_TRUE(client->Put("/other", "not watched").ok());
  EXPECT_TRUE(seen.WaitFor([&]() REQUIRES(seen.mu) {
    return seen.keys.size() == 1 && seen.keys.count("/view/w1") == 1;
  }));

  // Kill the member the watch streams from; write while it moves to another. The writer connects
  // first: if the killed member led etcd's raft, calls fail until the others elect a leader.
  auto other = Connect(etcd_->endpoint(1));
  ASSERT_TRUE(other);
  etcd_->Kill(0);
  PutUntilItSucceeds(*other, "/view/w2", "c");
  PutUntilItSucceeds(*other, "/view/w1", "b2");
  EXPECT_TRUE(seen.WaitFor([&]() REQUIRES(seen.mu) {
    return seen.keys.size() == 2 && seen.keys["/view/w1"] == "b2" && seen.keys.count("/view/w2");
  }));
  MutexLock lock(&seen.mu);
  EXPECT_GE(seen.disconnects, 1);
  EXPECT_GE(seen.reconnects, 1);
  EXPECT_EQ(seen.snapshots, 0);
}

TEST_F(EtcdClientTest, AWatchFromACompactedRevisionListsThePrefixAgain) {
  auto client = Connect(etcd_->endpoints());
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->Put("/c/a", "1").ok());
  auto first = client->GetPrefix("/c/");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(client->Put("/c/b", "2").ok());
  ASSERT_TRUE(client->Delete("/c/a").ok());
  auto rev = client->Put("/c/z", "3");
  ASSERT_TRUE(rev.ok());
  auto compacted = etcd_->Ctl({"compaction", std::to_string(*rev)});
  ASSERT_TRUE(compacted.ok()) << compacted.status().message();
  Seen seen;
  auto watch = Watch(client, seen, "/c/", first->revision);
  EXPECT_TRUE(seen.WaitFor([&]() REQUIRES(seen.mu) { return seen.snapshots == 1; }));
  ASSERT_TRUE(client->Put("/c/after", "4").ok());
  EXPECT_TRUE(seen.WaitFor([&]() REQUIRES(seen.mu) {
    return seen.keys ==
           std::map<std::string, std::string>{{"/c/b", "2"}, {"/c/z", "3"}, {"/c/after", "4"}};
  }));
}

TEST_F(EtcdClientTest, WithEveryMemberDownCallsFailWithinTheirTimeoutAndTheWatchSaysSo) {
  auto client = Connect(etcd_->endpoints());
  ASSERT_TRUE(client);
  auto listed = client->GetPrefix("/v/");
  ASSERT_TRUE(listed.ok());
  Seen seen;
  auto watch = Watch(client, seen, "/v/", listed->revision);
  for (int i = 0; i < etcd_->size(); ++i) etcd_->Kill(i);
  EXPECT_TRUE(seen.WaitFor([&]() REQUIRES(seen.mu) { return seen.disconnects >= 1; }));
  auto start = Clock::now();
  auto put = client->Put("/v/x", "1");
  // Its timeouts (2 s a member) end it: only a hang, not a busy machine, goes past this.
  EXPECT_LT(Clock::now() - start, testing::kWaitTimeout);
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.status().code(), StatusCode::kUnavailable) << put.status().message();
  EXPECT_NE(put.status().message().find("etcd"), std::string::npos);
}

TEST_F(EtcdClientTest, AuthenticatesAsAUserAndNeverShowsThePassword) {
  const std::string password = "pw-8c1f-secret";
  ASSERT_TRUE(etcd_->Ctl({"user", "add", "root:" + password}).ok());
  // A user granted only the cluster's prefix, as an operator would give the masters.
  ASSERT_TRUE(etcd_->Ctl({"role", "add", "lc"}).ok());
  ASSERT_TRUE(
      etcd_->Ctl({"role", "grant-permission", "lc", "readwrite", "/lc/", "--prefix=true"}).ok());
  ASSERT_TRUE(etcd_->Ctl({"user", "add", "lc:" + password}).ok());
  ASSERT_TRUE(etcd_->Ctl({"user", "grant-role", "lc", "lc"}).ok());
  ASSERT_TRUE(etcd_->Ctl({"auth", "enable"}).ok());
  EtcdOptions options;
  options.user = "root";
  options.password = Secret(password);
  auto client = Connect(etcd_->endpoints(), options);
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->Put("/a/k", "v").ok());
  EXPECT_EQ(client->Get("/a/k")->kvs.at(0).value, "v");

  EtcdOptions limited;
  limited.endpoints = {etcd_->endpoint(0)};
  limited.user = "lc";
  limited.password = Secret(password);
  limited.probe_key = "/lc/leader";
  auto within = EtcdClient::Connect(limited);
  ASSERT_TRUE(within.ok()) << within.status().message();
  EXPECT_TRUE((*within)->Put("/lc/k", "v").ok());
  auto outside = (*within)->Put("/a/k", "w");
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.status().message().find("permission denied"), std::string::npos)
      << outside.status().message();

  EtcdOptions wrong;
  wrong.endpoints = {etcd_->endpoint(0)};
  wrong.user = "root";
  wrong.password = Secret("not-" + password);
  auto refused = EtcdClient::Connect(wrong);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("authenticating as root"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(refused.status().message().find(password), std::string::npos);

  EtcdOptions none;
  none.endpoints = {etcd_->endpoint(0)};
  auto anonymous = EtcdClient::Connect(none);
  ASSERT_FALSE(anonymous.ok());
}

// etcd serving TLS and asking clients for a certificate (--client-cert-auth): the client verifies
// the members against --etcd-ca and presents --etcd-cert/--etcd-key; without them, or over plain
// text, it is refused with a message naming the endpoint.
// etcd forgets a token its holder has not used for --auth-token-ttl: the next call is refused
// (invalid auth token), and the client logs in again and retries without failing it.
TEST(EtcdAuthTest, ATokenThatLapsesIsRenewedWithoutAFailedCall) {
  auto etcd = EtcdCluster::Start(1, nullptr, {"--auth-token-ttl", "1"});
  ASSERT_TRUE(etcd.ok()) << etcd.status().message();
  const std::string password = "pw-5d2e-secret";
  ASSERT_TRUE((*etcd)->Ctl({"user", "add", "root:" + password}).ok());
  ASSERT_TRUE((*etcd)->Ctl({"auth", "enable"}).ok());
  EtcdOptions options;
  options.endpoints = {(*etcd)->endpoint(0)};
  options.user = "root";
  options.password = Secret(password);
  auto client = EtcdClient::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status().message();
  for (int i = 0; i < 3; ++i) {
    auto put = (*client)->Put("/a/k", std::to_string(i));
    ASSERT_TRUE(put.ok()) << put.status().message();
    // Kept: the token's lifetime is etcd's (--auth-token-ttl), timed by its clock.
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // the token lapses
  }
  auto back = (*client)->Get("/a/k");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->kvs.at(0).value, "2");
}

TEST(EtcdTlsTest, TalksTlsWithACertificateAndIsRefusedWithoutOne) {
  testing::TempDir dir("lakecache-etcd-tls");
  auto tls = testing::MakeSelfSignedCert(dir.path());
  ASSERT_TRUE(tls.ok()) << tls.status().message();
  auto cluster = EtcdCluster::Start(1, &*tls);
  ASSERT_TRUE(cluster.ok()) << cluster.status().message();
  std::string endpoint = (*cluster)->endpoint(0);
  ASSERT_TRUE(endpoint.starts_with("https://")) << endpoint;

  EtcdOptions options;
  options.endpoints = {endpoint};
  options.ca_file = tls->cert_path;
  options.cert_file = tls->cert_path;
  options.key_file = tls->key_path;
  options.timeout = std::chrono::milliseconds(3000);
  auto client = EtcdClient::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status().message();
  ASSERT_TRUE((*client)->Put("/tls/k", "v").ok());
  EXPECT_EQ((*client)->Get("/tls/k")->kvs.at(0).value, "v");

  EtcdOptions no_certificate = options;  // the members are trusted, but we show no certificate
  no_certificate.cert_file.clear();
  no_certificate.key_file.clear();
  auto refused = EtcdClient::Connect(no_certificate);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(endpoint), std::string::npos)
      << refused.status().message();

  EtcdOptions untrusted = options;  // the system's CAs do not know the members' certificate
  untrusted.ca_file.clear();
  EXPECT_FALSE(EtcdClient::Connect(untrusted).ok());

  EtcdOptions plain;  // plain text to a TLS member
  plain.endpoints = {endpoint.substr(std::string("https://").size())};
  plain.timeout = std::chrono::milliseconds(3000);
  EXPECT_FALSE(EtcdClient::Connect(plain).ok());
}

}  // namespace
}  // namespace lakecache
