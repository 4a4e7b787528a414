#include "security/auth.h"

#include <grpc/grpc_security_constants.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "rpc/grpc_util.h"
#include "rpc/lakecache.pb.h"
#include "rpc/tls.h"

namespace lakecache::security {
namespace {

constexpr std::string_view kRoleNames[kRoleCount] = {"worker", "master", "client", "admin"};
constexpr auto kRecheck = std::chrono::seconds(1);
// How often gRPC looks at certificate files for a renewed one.
constexpr unsigned kCertificateRefreshSeconds = 1;
constexpr std::string_view kBearer = "Bearer ";

std::string RoleList(RoleSet roles) {
  std::string out;
  for (int i = 0; i < kRoleCount; ++i) {
    if ((roles & (1u << i)) == 0) continue;
    if (!out.empty()) out += " or ";
    out += kRoleNames[i];
  }
  return out;
}

std::array<unsigned char, 32> Sha256(std::string_view text) {
  std::array<unsigned char, 32> out{};
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), out.data());
  return out;
}

// Presents the token on every call; inline (no thread hop: IsBlocking is false).
class TokenPlugin final : public grpc::MetadataCredentialsPlugin {
 public:
  explicit TokenPlugin(std::shared_ptr<WatchedFile> token) : token_(std::move(token)) {}
  bool IsBlocking() const override { return false; }
  const char* GetType() const override { return "lakecache-token"; }
  grpc::Status GetMetadata(grpc::string_ref, grpc::string_ref, const grpc::AuthContext&,
                           std::multimap<grpc::string, grpc::string>* metadata) override {
    Result<std::string> token = token_->Read();
    if (!token.ok())
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, token.status().message());
    metadata->emplace("authorization", std::string(kBearer) + *token);
    return grpc::Status::OK;
  }

 private:
  std::shared_ptr<WatchedFile> token_;
};

// TLS trusting `ca_path` (with `key_path`/`cert_path`: presenting that certificate too) and
// presenting `token` on every call.
std::shared_ptr<grpc::ChannelCredentials> TlsWithToken(const std::string& ca_path,
                                                       const std::string& key_path,
                                                       const std::string& cert_path,
                                                       std::shared_ptr<WatchedFile> token) {
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider;
  if (key_path.empty()) {
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        ca_path, kCertificateRefreshSeconds);
  } else {
    provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        key_path, cert_path, ca_path, kCertificateRefreshSeconds);
  }
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(provider);
  options.watch_root_certs();
  if (!key_path.empty()) options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  return grpc::CompositeChannelCredentials(
      grpc::experimental::TlsCredentials(options),
      grpc::MetadataCredentialsFromPlugin(std::make_unique<TokenPlugin>(std::move(token))));
}

}  // namespace

std::string_view RoleName(Role role) { return kRoleNames[static_cast<int>(role)]; }

std::string WorkerTlsName(std::string_view worker_id) {
  return std::string(worker_id) + ".worker.lakecache";
}

std::string WorkerIdFromFingerprint(std::string_view fingerprint) {
  return std::string(fingerprint.substr(0, 16));
}

Result<std::string> WatchedFile::Read() const {
  MutexLock lock(&mu_);
  auto now = std::chrono::steady_clock::now();
  if (now - checked_ < kRecheck && !stamp_.empty()) return value_;
  checked_ = now;
  std::string stamp = rpc::FileStamp(path_);
  if (stamp == stamp_ && !stamp.empty()) return value_;
  stamp_ = stamp;
  std::ifstream in(path_);
  if (stamp.empty() || !in) {
    value_ = Status::NotFound(path_ + " is missing or unreadable");
    return value_;
  }
  std::stringstream buf;
  buf << in.rdbuf();
  std::string text = buf.str();
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  if (text.empty()) {
    value_ = Status::InvalidArgument(path_ + " is empty");
  } else {
    value_ = std::move(text);
  }
  return value_;
}

ClusterCredentials::ClusterCredentials(std::string dir, Role role)
    : dir_(std::move(dir)),
      role_(role),
      token_(std::make_shared<WatchedFile>(dir_ + "/" + std::string(RoleName(role)) + ".token")),
      shared_(TlsWithToken(dir_ + "/ca.crt", "", "", token_)) {}

Result<std::shared_ptr<const ClusterCredentials>> ClusterCredentials::Open(const std::string& dir,
                                                                           Role as,
                                                                           std::string_view what) {
  std::shared_ptr<const ClusterCredentials> made(new ClusterCredentials(dir, as));
  struct stat st {};
  if (::stat(made->ca_path().c_str(), &st) != 0) {
    return Status::InvalidArgument("credentials folder " + dir +
                                   " has no ca.crt (the cluster's CA; `lakecache cert --dir " +
                                   dir + "` makes one)");
  }
  Result<std::string> token = made->Token();
  if (!token.ok()) {
    return Status::InvalidArgument("credentials folder " + dir + " has no usable " +
                                   std::string(RoleName(as)) + ".token: " + std::string(what) +
                                   " calls the cluster as its " + std::string(RoleName(as)) +
                                   " role");
  }
  return made;
}

std::shared_ptr<grpc::Channel> ClusterCredentials::Channel(const std::string& address,
                                                           const std::string& peer_name,
                                                           const std::string& key_path,
                                                           const std::string& cert_path) const {
  if (key_path.empty()) return rpc::OpenChannel(address, shared_, peer_name);
  return rpc::OpenChannel(address, TlsWithToken(ca_path(), key_path, cert_path, token_), peer_name);
}

std::shared_ptr<grpc::Channel> WorkerChannel(const std::string& address, const std::string& id,
                                             const ClusterCredentials* credentials) {
  if (credentials == nullptr) return rpc::OpenChannel(address);
  return credentials->Channel(address, WorkerTlsName(id));
}

std::shared_ptr<grpc::Channel> MasterChannel(const std::string& address,
                                             const ClusterCredentials* credentials) {
  if (credentials == nullptr) return rpc::OpenChannel(address);
  return credentials->Channel(address, kMasterTlsName);
}

std::shared_ptr<grpc::ServerCredentials> ServerTls(const std::string& key_path,
                                                   const std::string& cert_path,
                                                   const std::string& ca_path,
                                                   bool verify_clients) {
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      key_path, cert_path, ca_path, kCertificateRefreshSeconds);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(verify_clients ? GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY
                                               : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  return grpc::experimental::TlsServerCredentials(options);
}

std::shared_ptr<Authorizer> Authorizer::FromFolder(const std::string& dir) {
  std::shared_ptr<Authorizer> a(new Authorizer());
  a->dir_ = dir;
  for (int i = 0; i < kRoleCount; ++i) {
    a->files_[i] = std::make_shared<WatchedFile>(dir + "/" + std::string(kRoleNames[i]) + ".token");
  }
  return a;
}

std::shared_ptr<Authorizer> Authorizer::Pushed() {
  std::shared_ptr<Authorizer> a(new Authorizer());
  a->pushed_ = true;
  return a;
}

void Authorizer::Refresh() const {
  if (pushed_) return;
  for (int i = 0; i < kRoleCount; ++i) {
    Result<std::string> token = files_[i]->Read();  // cheap: re-read only when changed
    Known k;
    if (token.ok()) k = Known{true, Sha256(*token)};
    MutexLock lock(&mu_);
    known_[i] = k;
  }
}

Status Authorizer::CheckToken(std::string_view token, RoleSet allowed,
                              std::string_view method) const {
  Refresh();
  std::string needs = std::string(method) + " needs the " + RoleList(allowed) + " role";
  MutexLock lock(&mu_);
  if (pushed_ && !received_) {
    return Status::Unavailable(needs + ", and this worker has not registered with the master yet");
  }
  if (token.empty()) return Status::Unauthenticated(needs + "; the call carried no token");
  Digest presented = Sha256(token);
  int matched = -1;
  for (int i = 0; i < kRoleCount; ++i) {
    // Every digest is compared, in constant time: the time taken tells nothing about any token.
    bool same = known_[i].set &&
                CRYPTO_memcmp(presented.data(), known_[i].digest.data(), presented.size()) == 0;
    if (same && matched < 0) matched = i;
  }
  if (matched < 0) {
    return Status::Unauthenticated(needs + "; the call's token is not one of this cluster's");
  }
  if ((allowed & (1u << matched)) == 0) {
    return Status::AccessDenied(needs + "; the call's token is the " +
                                std::string(kRoleNames[matched]) + " role's");
  }
  return Status::Ok();
}

grpc::Status Authorizer::Check(const grpc::ServerContextBase* context, RoleSet allowed,
                               std::string_view method) const {
  std::string_view token;
  const auto& metadata = context->client_metadata();
  auto it = metadata.find("authorization");
  if (it != metadata.end()) {
    std::string_view value(it->second.data(), it->second.size());
    if (value.substr(0, kBearer.size()) == kBearer) token = value.substr(kBearer.size());
  }
  return rpc::ToGrpcStatus(CheckToken(token, allowed, method));
}

void Authorizer::FillDigests(google::protobuf::RepeatedPtrField<rpc::RoleDigest>* out) const {
  Refresh();
  MutexLock lock(&mu_);
  for (int i = 0; i < kRoleCount; ++i) {
    if (!known_[i].set) continue;
    rpc::RoleDigest* d = out->Add();
    d->set_role(std::string(kRoleNames[i]));
    d->set_sha256(std::string(reinterpret_cast<const char*>(known_[i].digest.data()),
                              known_[i].digest.size()));
  }
}

void Authorizer::Update(const google::protobuf::RepeatedPtrField<rpc::RoleDigest>& digests) {
  std::array<Known, kRoleCount> fresh{};
  for (const rpc::RoleDigest& d : digests) {
    for (int i = 0; i < kRoleCount; ++i) {
      if (d.role() != kRoleNames[i] || d.sha256().size() != fresh[i].digest.size()) continue;
      fresh[i].set = true;
      std::memcpy(fresh[i].digest.data(), d.sha256().data(), d.sha256().size());
    }
  }
  MutexLock lock(&mu_);
  known_ = fresh;
  received_ = true;
}

bool PeerCertificateNames(const grpc::ServerContextBase* context, std::string_view name) {
  std::shared_ptr<const grpc::AuthContext> auth = context->auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return false;
  for (const grpc::string_ref& san : auth->FindPropertyValues(GRPC_X509_SAN_PROPERTY_NAME)) {
    if (std::string_view(san.data(), san.size()) == name) return true;
  }
  return false;
}

}  // namespace lakecache::security
