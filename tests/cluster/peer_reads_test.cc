// PeerReads against scripted workers on the bulk path: the owner's answer (bytes or a redirect,
// with its digest), a holder that has the block, misses it or sends other bytes; a block readable
// from its relay while it lands.
#include "worker/peer_reads.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "rpc/block_frame.h"
#include "rpc/bulk_connection.h"
#include "rpc/bulk_protocol.h"
#include "rpc/lakecache.pb.h"

namespace lakecache {
namespace peer_reads_test {

struct Scripted {
  Status status;
  std::string data;
  std::optional<uint64_t> digest;
  std::string redirect;
  // Set: the first half of the data is sent, then this is called, then the rest (or, when it
  // returns false, the connection is closed).
  std::function<bool()> between = nullptr;
};

// A worker's bulk path that answers each read as `answer` says, and records the requests.
class ScriptedWorker {
 public:
  explicit ScriptedWorker(std::function<Scripted(const rpc::BlockReadRequest&)> answer)
      : answer_(std::move(answer)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(listen_fd_, 16), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    address_ = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~ScriptedWorker() {
    ::shutdown(listen_fd_, SHUT_RDWR);
    acceptor_.join();
    for (std::thread& t : served_) t.join();
    ::close(listen_fd_);
  }
  const std::string& address() const { return address_; }
  std::vector<rpc::BlockReadRequest> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void Accept() {
    for (;;) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      served_.emplace_back([this, fd] { Serve(fd); });
    }
  }
  void Serve(int fd) {
    auto forever = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    auto conn = rpc::BulkConnection::Accept(fd, "peer", nullptr, forever);
    if (!conn.ok()) return;
    for (;;) {
      bool closed = false;
      auto request = rpc::NextRequest(**conn, forever, &closed);
      if (!request.ok()) return;
      if (rpc::IsPing(*request)) {  // the reader's watcher asking whether this worker answers
        if (!rpc::SendReply(**conn, Status::Ok(), {}, forever).ok()) return;
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(*request);
      }
      Scripted reply = answer_(*request);
      if (reply.between) {
        std::string head = rpc::EncodeReplyHeader(reply.status, reply.data.size(), reply.digest);
        const size_t half = reply.data.size() / 2;
        std::span<const char> first[] = {head, std::span<const char>(reply.data).first(half)};
        std::span<const char> rest[] = {std::span<const char>(reply.data).subspan(half)};
        if (!(**conn).WriteAll(first, forever).ok() || !reply.between() ||
            !(**conn).WriteAll(rest, forever).ok()) {
          return;
        }
        continue;
      }
      if (!rpc::SendReply(**conn, reply.status, reply.data, forever, -1, 0, reply.digest,
                          reply.redirect)
               .ok()) {
        return;
      }
    }
  }

  std::function<Scripted(const rpc::BlockReadRequest&)> answer_;
  int listen_fd_ = -1;
  std::string address_;
  std::thread acceptor_;
  std::vector<std::thread> served_;
  mutable std::mutex mu_;
  std::vector<rpc::BlockReadRequest> requests_;
};

// A one-shot gate between a scripted worker and the test: the first Open says whether to pass.
class Gate {
 public:
  void Open(bool pass) {
    std::lock_guard<std::mutex> lock(mu_);
    if (opened_) return;
    opened_ = true;
    pass_ = pass;
    cv_.notify_all();
  }
  // False when it was opened to stop, or was not opened within a minute.
  bool Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::minutes(1), [&] { return opened_; }) && pass_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool opened_ = false;
  bool pass_ = false;
};

constexpr uint64_t kBlock = 64 << 10;

class PeerReadsTest : public ::testing::Test {
 protected:
  PeerReadsTest() {
    good_.resize(kBlock);
    for (size_t i = 0; i < good_.size(); ++i) good_[i] = static_cast<char>(i * 7 + 1);
    digest_ = XXH3_64bits(good_.data(), good_.size());
    id_.set_ns("ns");
    id_.set_key("model.safetensors");
    id_.set_etag("e1");
    id_.set_object_size(kBlock);
    id_.set_block_size(kBlock);
    id_.set_index(0);
    key_ = BlockKey{ContentId{7, 9}, 0};
    // Of two workers "p" and "q", the owner of the key is the one rendezvous picks.
    std::vector<RendezvousNode> nodes = {PlacementNode("p", 1 << 30), PlacementNode("q", 1 << 30)};
    const bool p_owns = RendezvousPick(StableKeyHash(key_), nodes) == 0;
    owner_id_ = p_owns ? "p" : "q";
    holder_id_ = p_owns ? "q" : "p";
  }

  // PeerReads of worker "self", with the owner and the holder in its view.
  std::unique_ptr<PeerReads> Reads(const ScriptedWorker& owner, const ScriptedWorker& holder) {
    PeerReadsOptions options;
    options.self_id = "self";
    options.attempt_timeout = std::chrono::seconds(10);
    auto reads = PeerReads::Make(options);
    EXPECT_TRUE(reads.ok());
    rpc::ClusterView view;
    view.set_epoch(1);
    for (const auto& [id, address] :
         {std::pair{owner_id_, owner.address()}, std::pair{holder_id_, holder.address()}}) {
      rpc::WorkerInfo* w = view.add_workers();
      w->set_id(id);
      w->set_address(address);
      w->set_data_address(address);
      w->set_capacity_bytes(1 << 30);
    }
    (*reads)->SetView(view);
    EXPECT_EQ((*reads)->OwnerOf(key_), owner_id_);
    return std::move(*reads);
  }

  // The owner's right answer, half of it at once, the rest when the test opens go_on (or, if it
  // says so, the connection closed instead).
  Scripted HalfThenGate(Gate& half_sent, Gate& go_on) {
    return Scripted{{}, good_, digest_, "", [&] {
                      half_sent.Open(true);
                      return go_on.Wait();
                    }};
  }

  // A Fetch on a thread of its own, joined (after the owner is let go on) by Join or at the end
  // of the test, whichever comes first.
  struct FetchBeside {
    FetchBeside(PeerReadsTest* test, PeerReads& reads, Gate& gate)
        : go_on(gate), thread([this, test, &reads] { got = test->Fetch(reads); }) {}
    ~FetchBeside() { Join(); }
    void Join() {
      go_on.Open(true);
      if (thread.joinable()) thread.join();
    }
    Gate& go_on;
    Result<std::shared_ptr<Block>> got = Status::Internal("not fetched");
    std::thread thread;
  };

  Result<std::shared_ptr<Block>> Fetch(PeerReads& reads) {
    return reads.Fetch(id_, key_, kBlock, [](size_t n) { return Block::Allocate(n); });
  }

  std::string good_;
  uint64_t digest_ = 0;
  rpc::BlockId id_;
  BlockKey key_;
  std::string owner_id_, holder_id_;
};

TEST_F(PeerReadsTest, TheOwnersBytesAreTakenWhenTheyMatchItsDigest) {
  ScriptedWorker owner([&](const rpc::BlockReadRequest&) {
    return Scripted{{}, good_, digest_, ""};
  });
  ScriptedWorker holder([](const rpc::BlockReadRequest&) { return Scripted{}; });
  auto reads = Reads(owner, holder);
  auto got = Fetch(*reads);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(std::string((*got)->data(), (*got)->size()), good_);
  ASSERT_EQ(owner.requests().size(), 1u);
  const rpc::BlockReadRequest asked = owner.requests()[0];  // requests() is a copy
  EXPECT_EQ(asked.flags, rpc::kReadForReplica);
  EXPECT_EQ(asked.requester, "self");
  EXPECT_TRUE(holder.requests().empty());
  EXPECT_EQ(reads->Stats().replicas_fetched, 1u);
}

TEST_F(PeerReadsTest, ARedirectIsFollowedToTheHolderForWhatItHolds) {
  ScriptedWorker owner([&](const rpc::BlockReadRequest&) {
    return Scripted{{}, "", digest_, holder_id_};
  });
  ScriptedWorker holder([&](const rpc::BlockReadRequest&) { return Scripted{{}, good_, {}, ""}; });
  auto reads = Reads(owner, holder);
  auto got = Fetch(*reads);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(std::string((*got)->data(), (*got)->size()), good_);
  ASSERT_EQ(holder.requests().size(), 1u);
  EXPECT_EQ(holder.requests()[0].flags, rpc::kReadForReplica | rpc::kReadHeldOnly)
      << "a holder is never made to fetch";
  EXPECT_EQ(owner.requests().size(), 1u);
  EXPECT_EQ(reads->Stats().redirects, 1u);
}

// A holder that sends other bytes than the owner's digest (corrupt, or forged) is not believed:
// the owner is asked again for the bytes themselves.
TEST_F(PeerReadsTest, ATamperedReplicaIsRefusedAndTheOwnerAskedAgain) {
  ScriptedWorker owner([&](const rpc::BlockReadRequest& r) {
    if ((r.flags & rpc::kReadNoRedirect) != 0) return Scripted{{}, good_, digest_, ""};
    return Scripted{{}, "", digest_, holder_id_};
  });
  std::string tampered = good_;
  tampered[kBlock / 2] ^= 1;
  ScriptedWorker holder([&](const rpc::BlockReadRequest&) {
    return Scripted{{}, tampered, {}, ""};
  });
  auto reads = Reads(owner, holder);
  auto got = Fetch(*reads);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(std::string((*got)->data(), (*got)->size()), good_) << "never the holder's bytes";
  ASSERT_EQ(owner.requests().size(), 2u);
  EXPECT_NE(owner.requests()[1].flags & rpc::kReadNoRedirect, 0);
  EXPECT_EQ(reads->Stats().digest_mismatches, 1u);
  EXPECT_EQ(reads->Stats().holder_misses, 1u);
}

TEST_F(PeerReadsTest, AHolderThatMissesSendsTheReaderBackToTheOwner) {
  ScriptedWorker owner([&](const rpc::BlockReadRequest& r) {
    if ((r.flags & rpc::kReadNoRedirect) != 0) return Scripted{{}, good_, digest_, ""};
    return Scripted{{}, "", digest_, holder_id_};
  });
  ScriptedWorker holder([](const rpc::BlockReadRequest&) {
    return Scripted{Status::NotFound("not held"), "", {}, ""};
  });
  auto reads = Reads(owner, holder);
  auto got = Fetch(*reads);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(std::string((*got)->data(), (*got)->size()), good_);
  EXPECT_EQ(reads->Stats().holder_misses, 1u);
  EXPECT_EQ(reads->Stats().digest_mismatches, 0u);
}

TEST_F(PeerReadsTest, BytesThatDoNotMatchTheOwnersOwnDigestAreRefused) {
  ScriptedWorker owner([&](const rpc::BlockReadRequest&) {
    return Scripted{{}, good_, digest_ + 1, ""};
  });
  ScriptedWorker holder([](const rpc::BlockReadRequest&) { return Scripted{}; });
  auto reads = Reads(owner, holder);
  auto got = Fetch(*reads);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kCorruption) << got.status().ToString();
}

TEST_F(PeerReadsTest, ABlockThisWorkerOwnsIsNotFetchedFromPeers) {
  PeerReadsOptions options;
  options.self_id = "self";
  auto reads = PeerReads::Make(options);
  ASSERT_TRUE(reads.ok());
  rpc::ClusterView view;
  view.set_epoch(1);
  rpc::WorkerInfo* w = view.add_workers();
  w->set_id("self");
  w->set_capacity_bytes(1 << 30);
  (*reads)->SetView(view);
  EXPECT_EQ((*reads)->OwnerOf(key_), "");
  auto got = (*reads)->Fetch(id_, key_, kBlock, [](size_t n) { return Block::Allocate(n); });
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
}

// While the block lands, it is listed under its key: a worker sent here by the owner gets the
// bytes that arrived, and waits for the others.
TEST_F(PeerReadsTest, ABlockIsReadableFromItsRelayWhileItLands) {
  Gate half_sent, go_on;
  ScriptedWorker owner(
      [&](const rpc::BlockReadRequest&) { return HalfThenGate(half_sent, go_on); });
  ScriptedWorker holder([](const rpc::BlockReadRequest&) { return Scripted{}; });
  auto reads = Reads(owner, holder);
  EXPECT_EQ(reads->relays().Find(key_), nullptr);
  FetchBeside fetch(this, *reads, go_on);
  ASSERT_TRUE(half_sent.Wait()) << "the owner was not asked";
  std::shared_ptr<BlockRelay> relay = reads->relays().Find(key_);
  ASSERT_NE(relay, nullptr) << "listed before the owner is asked";
  auto soon = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(30); };
  Result<uint64_t> landed = relay->WaitFor(kBlock / 2, soon());
  ASSERT_TRUE(landed.ok()) << landed.status().ToString();
  EXPECT_GE(*landed, kBlock / 2);
  EXPECT_EQ(std::string(relay->block()->data(), kBlock / 2), good_.substr(0, kBlock / 2));
  // The rest cannot land before the owner sends it.
  EXPECT_EQ(relay->WaitFor(kBlock, std::chrono::steady_clock::now()).status().code(),
            StatusCode::kDeadlineExceeded);
  go_on.Open(true);
  landed = relay->WaitFor(kBlock, soon());
  fetch.Join();
  ASSERT_TRUE(landed.ok()) << landed.status().ToString();
  EXPECT_EQ(*landed, kBlock);
  ASSERT_TRUE(fetch.got.ok()) << fetch.got.status().ToString();
  EXPECT_EQ(fetch.got->get(), relay->block().get()) << "the relay is the block being filled";
  EXPECT_EQ(std::string(relay->block()->data(), kBlock), good_);
  EXPECT_EQ(reads->relays().Find(key_), nullptr) << "unlisted once fetched";
}

// The owner's connection breaks mid-block: those waiting on the relay fail (and ask their owner),
// those that asked only for what landed have it.
TEST_F(PeerReadsTest, ARelayWhoseUpstreamBreaksFailsItsWaiters) {
  Gate half_sent, go_on;
  ScriptedWorker owner(
      [&](const rpc::BlockReadRequest&) { return HalfThenGate(half_sent, go_on); });
  ScriptedWorker holder([](const rpc::BlockReadRequest&) { return Scripted{}; });
  auto reads = Reads(owner, holder);
  FetchBeside fetch(this, *reads, go_on);
  ASSERT_TRUE(half_sent.Wait()) << "the owner was not asked";
  std::shared_ptr<BlockRelay> relay = reads->relays().Find(key_);
  ASSERT_NE(relay, nullptr);
  auto soon = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(30); };
  Result<uint64_t> rest = Status::Internal("not waited");
  std::thread waiter([&] { rest = relay->WaitFor(kBlock, soon()); });
  go_on.Open(false);  // the owner closes the connection
  waiter.join();
  fetch.Join();
  EXPECT_FALSE(fetch.got.ok());
  EXPECT_EQ(rest.status().code(), StatusCode::kUnavailable) << rest.status().ToString();
  EXPECT_TRUE(relay->WaitFor(kBlock / 2, soon()).ok()) << "what landed is still there";
  EXPECT_EQ(reads->relays().Find(key_), nullptr);
}

}  // namespace peer_reads_test
}  // namespace lakecache
