// EtcdClient: the part of etcd's v3 API that membership and election use (keys, leases, one
// transaction shape and watches), over etcd's own gRPC services.
//
// Endpoints: every call goes to the endpoint that answered last; one that does not answer (down,
// partitioned, or a member without a leader: UNAVAILABLE or a deadline) moves the call to the next,
// so a member's loss costs a call at most one timeout. TLS when the endpoints are https://; etcd's
// authentication when a user is set: the token is fetched with the user's password (read from a
// file, never a flag) and fetched again when etcd reports it expired. Errors name the endpoint
// and what was asked, never the password or the token. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/result.h"
#include "common/secret.h"

namespace grpc {
class Channel;
class ClientContext;
class Status;
}  // namespace grpc

namespace etcdserverpb {
class WatchResponse;
}  // namespace etcdserverpb

namespace lakecache {

struct EtcdOptions {
  // HOST:PORT, http://HOST:PORT or https://HOST:PORT, one per member; all plain or all TLS.
  std::vector<std::string> endpoints;
  // TLS: the CA that signed the members' certificates (empty: the system's), and a client
  // certificate and key for members that ask for one.
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  // etcd's authentication (empty user: none) with the user's password.
  std::string user;
  Secret password;
  std::chrono::milliseconds timeout{5000};  // of one call at one endpoint
  // The key Connect reads to prove a member answers: one the user may read (a user granted only
  // the cluster's prefix may read nothing else).
  std::string probe_key = "lakecache-connect-probe";
};

// "a:2379,https://b:2379" -> the list, each checked (HOST:PORT with a numeric port, optionally
// behind http:// or https://); an error naming `flag` otherwise.
Result<std::vector<std::string>> ParseEtcdEndpoints(std::string_view flag, std::string_view list);

struct EtcdKeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;
};

// The keys a Get found and the store's revision when it answered.
struct EtcdRange {
  std::vector<EtcdKeyValue> kvs;
  int64_t revision = 0;
};

class EtcdClient {
 public:
  // Checks the options and that some endpoint answers (and authenticates, with a user).
  static Result<std::shared_ptr<EtcdClient>> Connect(EtcdOptions options);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // A new lease of `ttl` (etcd may grant more: its minimum is 1.5 election timeouts).
  struct Lease {
    int64_t id = 0;
    std::chrono::seconds ttl{0};  // as granted
  };
  Result<Lease> Grant(std::chrono::seconds ttl);
  // Renews the lease once; the seconds it has left. kNotFound once it expired (or was revoked).
  Result<int64_t> KeepAlive(int64_t lease);
  Status Revoke(int64_t lease);

  // Sets the key (under `lease` if non-zero); the revision of the write.
  Result<int64_t> Put(const std::string& key, const std::string& value, int64_t lease = 0);
  // The key if it exists (kvs empty otherwise).
  Result<EtcdRange> Get(const std::string& key);
  // Every key starting with `prefix`.
  Result<EtcdRange> GetPrefix(const std::string& prefix);
  // Creates the key under `lease` unless it exists. True if this call created it.
  Result<bool> CreateIfAbsent(const std::string& key, const std::string& value, int64_t lease);
  // Deletes the key if it still has `create_revision` (was not deleted and made again since).
  Result<bool> DeleteIfCreated(const std::string& key, int64_t create_revision);
  Status Delete(const std::string& key);

  // The endpoint calls go to now.
  std::string endpoint() const EXCLUDES(mu_);
  const EtcdOptions& options() const { return options_; }

  // For EtcdWatch: runs `call` (a gRPC call or stream) against the current endpoint with the
  // token set on `context`; returns the endpoint's index for NextEndpoint.
  struct Target {
    std::shared_ptr<grpc::Channel> channel;
    size_t index = 0;
    std::string endpoint;
  };
  Target Current() const EXCLUDES(mu_);
  // Moves on from endpoint `index` (if it is still current) to the next.
  void NextEndpoint(size_t index) EXCLUDES(mu_);
  // Sets the auth token (when a user is configured) on a context; fetches one if none yet.
  Status Authorize(grpc::ClientContext* context, const Target& target) EXCLUDES(mu_);
  // After a call failed with `status`: true if the token expired (it was dropped: retry).
  bool TokenExpired(const grpc::Status& status) EXCLUDES(mu_);

 private:
  explicit EtcdClient(EtcdOptions options);
  // Runs `call(target, context)` at the current endpoint, moving on to the next while one does
  // not answer, and once more after a token expired. `what` names the request in errors.
  template <typename Call>
  Status Invoke(std::string_view what, Call&& call);
  // Logs in at `target`; the token. Called without the lock: a slow login holds up no other call.
  Result<Secret> Authenticate(const Target& target) const EXCLUDES(mu_);

  const EtcdOptions options_;
  mutable Mutex mu_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;  // one per endpoint; fixed after creation
  size_t current_ GUARDED_BY(mu_) = 0;
  Secret token_ GUARDED_BY(mu_);
};

// One change a watch saw.
struct EtcdEvent {
  bool deleted = false;  // a delete (or a lease's expiry); else a put
  EtcdKeyValue kv;       // for a delete: the key and the revision of the delete (mod_revision)
};

// What a watch hands its callback: events after the last revision it reported, or, when it could
// not resume there (the revisions were compacted away), every key under the prefix (snapshot set).
struct EtcdWatchUpdate {
  bool snapshot = false;
  std::vector<EtcdKeyValue> kvs;  // with snapshot: everything under the prefix
  std::vector<EtcdEvent> events;  // otherwise: the changes, in order
  int64_t revision = 0;           // the store's revision this update brings the caller to
};

// Watches every key under a prefix from a revision on, in a thread of its own: resumes from the
// last revision it reported after a broken stream (on another endpoint if its own stopped
// answering), lists the prefix again after a compaction, and reports whether it is connected, so
// a caller can keep its last view (marked stale) while etcd is out of reach.
//
// The callbacks run on the watch's thread, one at a time; they must not call Stop.
class EtcdWatch {
 public:
  using UpdateFn = std::function<void(const EtcdWatchUpdate&)>;
  using ConnectedFn = std::function<void(bool connected, const Status& why)>;
  // Starts after `revision` (a Get's revision: its keys are known).
  EtcdWatch(std::shared_ptr<EtcdClient> client, std::string prefix, int64_t revision,
            UpdateFn on_update, ConnectedFn on_connected);
  ~EtcdWatch();  // stops
  EtcdWatch(const EtcdWatch&) = delete;
  EtcdWatch& operator=(const EtcdWatch&) = delete;

  void Stop() EXCLUDES(mu_);

 private:
  void Run();
  // One stream from next_ until it breaks or Stop; returns why it ended (OK: after a compaction
  // it listed the prefix again, and a new stream resumes at once).
  Status Stream(const EtcdClient::Target& target);
  // What one response of the stream means: why it ends (OK: the prefix was listed again after a
  // compaction), or nullopt while it goes on.
  std::optional<Status> Handle(const etcdserverpb::WatchResponse& response,
                               const EtcdClient::Target& target);

  const std::shared_ptr<EtcdClient> client_;
  const std::string prefix_;
  const UpdateFn on_update_;
  const ConnectedFn on_connected_;
  // The watch thread's alone: the first revision not reported yet, and whether the last stream
  // was created (the Get before the watch answered, so it starts true).
  int64_t next_;
  bool connected_ = true;
  Mutex mu_;
  CondVar cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  grpc::ClientContext* live_ GUARDED_BY(mu_) = nullptr;  // the stream's, to cancel it
  std::thread thread_;
};

}  // namespace lakecache
