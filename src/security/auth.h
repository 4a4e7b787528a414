// Who may call what: the cluster's roles, their tokens, and TLS on every gRPC connection.
//
// A cluster's credentials folder (--credentials DIR, LAKECACHE_CREDENTIALS; `lakecache cert` or
// `cluster up --dir` makes one) holds files, the keys of a Kubernetes Secret:
//   ca.crt              the cluster CA: every process trusts only certificates it signed
//   ca.key              the CA's key: only the master holds it (it issues worker certificates)
//   tls.crt, tls.key    the master's serving certificate (name kMasterTlsName)
//   <role>.token        one bearer token per role: worker, master, client, admin
// A caller presents its role's token on every call (`authorization: Bearer ...` over TLS); a
// server checks it against the SHA-256 digests of the tokens it accepts, in constant time, and
// refuses a missing or unknown token (UNAUTHENTICATED) or another role's (PERMISSION_DENIED) with
// a message naming the method and the role it needs, never a token. Token files are re-read when
// they change, and certificates are watched by gRPC: both rotate without a restart.
//
// Workers hold only ca.crt and worker.token. The master gives each one a certificate of its own
// for the key it keeps (IssueCertificate: worker id = the key's fingerprint, name
// WorkerTlsName(id)), and the digests of the tokens it must accept (RegisterResponse). So one
// Secret shared by a DaemonSet still tells workers apart, and no worker can take another's id.
#pragma once

#include <grpcpp/support/status.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/mutex.h"
#include "common/result.h"

// Declared, not included: this header reaches many files, the generated protocol and gRPC's
// channel headers few of them (auth.cc and the callers that use a channel include them).
namespace google::protobuf {
template <typename T>
class RepeatedPtrField;
}  // namespace google::protobuf
namespace grpc {
class Channel;
class ChannelCredentials;
class ServerContextBase;
class ServerCredentials;
}  // namespace grpc
namespace lakecache::rpc {
class RoleDigest;
}  // namespace lakecache::rpc

namespace lakecache::security {

enum class Role : uint8_t { kWorker = 0, kMaster = 1, kClient = 2, kAdmin = 3 };
inline constexpr int kRoleCount = 4;
std::string_view RoleName(Role role);  // "worker", "master", "client", "admin"

// A set of roles: Roles(Role::kClient, Role::kAdmin).
using RoleSet = uint8_t;
template <typename... R>
constexpr RoleSet Roles(R... roles) {
  return static_cast<RoleSet>(((1u << static_cast<unsigned>(roles)) | ...));
}

// The name the master's certificate carries, and every caller verifies (whatever address it
// dials: a Service name or a pod IP changes nothing).
inline constexpr char kMasterTlsName[] = "lakecache-master";
// The name a worker's certificate carries: "<id>.worker.lakecache".
std::string WorkerTlsName(std::string_view worker_id);
// A worker's id: the first 16 hex digits of its key's fingerprint (x509.h KeyFingerprint).
std::string WorkerIdFromFingerprint(std::string_view fingerprint);

// A file's contents, re-read when the file changes (its mtime, size or inode: a Kubernetes Secret
// update swaps a symlink), checked at most once a second. Thread-safe.
class WatchedFile {
 public:
  explicit WatchedFile(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  // The contents without trailing white space; an error names the file (never its contents).
  Result<std::string> Read() const;

 private:
  std::string path_;
  mutable Mutex mu_;
  mutable std::chrono::steady_clock::time_point checked_ GUARDED_BY(mu_){};
  mutable std::string stamp_ GUARDED_BY(mu_);
  mutable Result<std::string> value_ GUARDED_BY(mu_) = Status::NotFound("not read yet");
};

// The credentials a process uses, opened from its folder for the role it acts as.
class ClusterCredentials {
 public:
  // Checks that DIR holds ca.crt and `as`'s token; an error says which file is missing and what
  // the command needs it for (`what`, e.g. "lakecache mount").
  static Result<std::shared_ptr<const ClusterCredentials>> Open(const std::string& dir, Role as,
                                                                std::string_view what);

  const std::string& dir() const { return dir_; }
  Role role() const { return role_; }
  std::string File(std::string_view name) const { return dir_ + "/" + std::string(name); }
  std::string ca_path() const { return File("ca.crt"); }
  // This role's token as it is now.
  Result<std::string> Token() const { return token_->Read(); }

  // A channel to `address` over TLS, verifying the peer's certificate against ca.crt and
  // `peer_name`, presenting this role's token on every call; with key_path/cert_path also this
  // certificate (the worker's own, to the master).
  std::shared_ptr<grpc::Channel> Channel(const std::string& address, const std::string& peer_name,
                                         const std::string& key_path = "",
                                         const std::string& cert_path = "") const;

 private:
  ClusterCredentials(std::string dir, Role role);
  std::string dir_;
  Role role_;
  std::shared_ptr<WatchedFile> token_;
  // TLS trusting ca.crt and the token, made once: every channel without a certificate of its own
  // shares them (and so the one thread that watches ca.crt), however many workers it dials.
  std::shared_ptr<grpc::ChannelCredentials> shared_;
};

// A channel to worker `id` at `address` / to the master at `address`: TLS with `credentials`,
// verifying the worker's own name (WorkerTlsName) or kMasterTlsName; plain text when null.
std::shared_ptr<grpc::Channel> WorkerChannel(const std::string& address, const std::string& id,
                                             const ClusterCredentials* credentials);
std::shared_ptr<grpc::Channel> MasterChannel(const std::string& address,
                                             const ClusterCredentials* credentials);

// TLS for a server from key and certificate files (watched: a renewed certificate is served to
// new connections without a restart), trusting ca.crt; `verify_clients`: ask for a client
// certificate and verify it when given (the master checks a worker's own).
std::shared_ptr<grpc::ServerCredentials> ServerTls(const std::string& key_path,
                                                   const std::string& cert_path,
                                                   const std::string& ca_path, bool verify_clients);

// The digests of the role tokens a server accepts, and the check of a call against them.
class Authorizer {
 public:
  // A master's: the folder's <role>.token files, re-read when they change.
  static std::shared_ptr<Authorizer> FromFolder(const std::string& dir);
  // A worker's: empty (every call refused as UNAVAILABLE: not registered yet) until the master
  // sends the digests (Update).
  static std::shared_ptr<Authorizer> Pushed();

  // `method` needs one of `allowed`: OK, or UNAUTHENTICATED (no token, or not one of this
  // cluster's) / PERMISSION_DENIED (another role's) naming the method and the roles it needs.
  Status CheckToken(std::string_view token, RoleSet allowed, std::string_view method) const;
  // The same for a gRPC call (its `authorization: Bearer` metadata).
  grpc::Status Check(const grpc::ServerContextBase* context, RoleSet allowed,
                     std::string_view method) const;

  // The digests (SHA-256 of each role's token) as the master hands them to workers.
  void FillDigests(google::protobuf::RepeatedPtrField<rpc::RoleDigest>* out) const;
  void Update(const google::protobuf::RepeatedPtrField<rpc::RoleDigest>& digests);

 private:
  using Digest = std::array<unsigned char, 32>;
  struct Known {
    bool set = false;
    Digest digest{};
  };
  Authorizer() = default;
  void Refresh() const;  // FromFolder: re-reads changed token files

  std::string dir_;  // FromFolder; empty: Pushed
  mutable Mutex mu_;
  mutable std::array<Known, kRoleCount> known_ GUARDED_BY(mu_);
  mutable std::array<std::shared_ptr<WatchedFile>, kRoleCount> files_;
  bool pushed_ = false;
  mutable bool received_ GUARDED_BY(mu_) = false;
};

// An authorizer may be null (a loopback server without credentials): everything is allowed.
inline grpc::Status Authorize(const Authorizer* authorizer, const grpc::ServerContextBase* context,
                              RoleSet allowed, std::string_view method) {
  return authorizer == nullptr ? grpc::Status::OK : authorizer->Check(context, allowed, method);
}

// True when the call's peer presented a certificate (verified against the CA) carrying DNS name
// `name`.
bool PeerCertificateNames(const grpc::ServerContextBase* context, std::string_view name);

}  // namespace lakecache::security
