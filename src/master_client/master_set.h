// MasterSet: the masters a client knows (`--master a:7400,b:7400`, LAKECACHE_MASTER) and which of
// them it calls.
//
// With etcd (docs/architecture.md, "Membership and election"), several masters serve one cluster
// and one of them leads. Every master serves the calls that need no leader (Register, Heartbeat,
// the cluster view, the namespaces, certificates, reports); a follower answers the others
// (listings, stats, write notes, load and free) with FAILED_PRECONDITION and the leader's address
// in the trailing metadata kLeaderMetadata (empty while no master leads). A MasterSet follows
// that: a call goes to the current master, the leader once one is known; a master that does not
// answer (refused, reset, silent past the attempt's deadline) is passed over for the next one, a
// redirect moves the call to the leader it names, and "no leader yet" is asked again after a
// short pause until the call's deadline. It gives up early when every master is out of reach, so
// a dead single master fails a call at once, as it always did. A set that knows what its channels
// speak (TLS or plain text) probes a master that does not answer, once (rpc/transport_probe.h):
// one that speaks the other fails the call at once (kInvalidArgument), saying what to pass.
// Thread-safe.
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/result.h"
#include "rpc/transport_probe.h"

namespace lakecache {

// The trailing metadata of a follower's redirect: the leader's HOST:PORT, or empty while no
// master leads.
inline constexpr char kLeaderMetadata[] = "lakecache-leader";

// A follower's answer to a call only the leader serves: FAILED_PRECONDITION naming `self` and
// the leader (empty: none yet, with `why`, e.g. "etcd out of reach"), the leader in the trailing
// metadata.
grpc::Status RedirectToLeader(grpc::ServerContext* context, const std::string& self,
                              const std::string& leader, const std::string& why);

// "HOST:PORT[,HOST:PORT...]" (spaces allowed after commas); an error naming `flag` otherwise.
Result<std::vector<std::string>> ParseMasterList(std::string_view flag, std::string_view list);

class MasterSet {
 public:
  using ChannelFn = std::function<std::shared_ptr<grpc::Channel>(const std::string& address)>;
  struct Master {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
  };
  // One attempt of a call on `master` with `context` (its deadline set): fills the response.
  using Attempt = std::function<grpc::Status(const Master& master, grpc::ClientContext* context)>;

  // `addresses` from ParseMasterList (at least one); `open` makes a channel to one (TLS and the
  // caller's role), speaking `transport` when that is given. Channels are opened when first
  // needed. `clock` times how long a master is passed over and the pauses between asks (it
  // outlives the set); the calls' deadlines are gRPC's, of the system clock.
  MasterSet(std::vector<std::string> addresses, ChannelFn open,
            std::optional<rpc::Transport> transport = std::nullopt,
            const SteadyClock* clock = SteadyClock::Real());

  // Calls `attempt` as the header says: each attempt gets at most `per_attempt`, all of them end
  // by `deadline`. The status names the master that gave it ("master a:7400: ...") and, when
  // several were tried, what the others said.
  Status Call(const Attempt& attempt, std::chrono::milliseconds per_attempt,
              std::chrono::system_clock::time_point deadline);

  // Waits until a channel to some master connects (it becomes the current one). kUnavailable
  // when none did by `deadline`; kInvalidArgument, before it, when a master that failed to
  // connect speaks the other transport (the message names it and says what to pass).
  Status WaitForAny(std::chrono::system_clock::time_point deadline);

  // The retries of one call made by hand (a stream, say), as Call makes them.
  class Attempts {
   public:
    Attempts(MasterSet& set, std::chrono::system_clock::time_point deadline);
    // After an attempt on `master` failed with `status`: whether to try again (on Current()),
    // having paused first when no master leads yet.
    bool Again(const Master& master, const grpc::Status& status,
               const grpc::ClientContext& context);
    // The last failure, naming its master, with what the others said before it; masters that
    // said the same are named together ("masters a:7400,b:7400: etcd is out of reach ...").
    Status Error() const;

   private:
    MasterSet& set_;
    const std::chrono::system_clock::time_point deadline_;
    std::vector<std::string> unreachable_;  // masters that did not answer, since one last did
    struct Answer {
      std::string master;
      std::string reason;  // what it said, without its name
    };
    std::vector<Answer> answers_;  // each master's latest answer, the last one last (four at most)
    std::string last_leader_;      // the leader the last redirect named
    std::chrono::milliseconds pause_{100};
    Status last_;                      // the last answer, naming its master
    std::vector<std::string> probed_;  // masters whose transport was probed
  };

  // The master calls go to now.
  Master Current();
  // After a call on `master` failed with `status` (and `context`'s trailing metadata): moves to
  // the leader named by a redirect, or past a master that did not answer. Whether another attempt
  // may succeed: false for an answer that another master would give too.
  bool Failed(const Master& master, const grpc::Status& status, const grpc::ClientContext& context);
  // The leader as a view or another answer names it (empty: unknown): calls go there next.
  void NoteLeader(const std::string& leader);

  const std::vector<std::string>& addresses() const { return addresses_; }
  // "master at a:7400" for one, "masters a:7400,b:7400" for several: for messages.
  std::string Describe() const;

  // When the master at `address` speaks the other transport than this set's channels: a status
  // naming it and what to pass (kInvalidArgument); OK otherwise, or when the set's transport is
  // unknown. Probes the address (a few round trips, at most `timeout`).
  Status CheckTransport(const std::string& address, std::chrono::milliseconds timeout) const;

 private:
  Master At(size_t i) REQUIRES(mu_);
  size_t IndexOf(const std::string& address) REQUIRES(mu_);
  // The first master after index i not marked down (the next one when all are).
  size_t NextAfter(size_t i) REQUIRES(mu_);
  // `master` answered: it is no longer passed over.
  void Answered(const Master& master) EXCLUDES(mu_);

  std::vector<std::string> addresses_;  // as given; known_ adds one slot for a leader outside them
  const ChannelFn open_;
  const std::optional<rpc::Transport> transport_;
  const SteadyClock* const clock_;
  Mutex mu_;
  std::vector<Master> known_ GUARDED_BY(mu_);
  // Per known_ entry: until when a master that did not answer is not made current by NoteLeader.
  std::vector<std::chrono::steady_clock::time_point> down_until_ GUARDED_BY(mu_);
  size_t current_ GUARDED_BY(mu_) = 0;
};

}  // namespace lakecache
