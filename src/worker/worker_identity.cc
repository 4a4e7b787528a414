#include <spdlog/spdlog.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "master_client/master_set.h"
#include "rpc/grpc_util.h"
#include "rpc/lakecache.grpc.pb.h"
#include "security/x509.h"
#include "worker/worker_server.h"

// The worker's identity: its key, the certificate the master issues for it, and the token digests
// kept beside them.
namespace lakecache {

Result<WorkerIdentity> LoadOrCreateWorkerIdentity(const std::string& dir, std::string* temp_dir) {
  std::string folder = dir;
  if (folder.empty()) {
    std::string made =
        (std::filesystem::temp_directory_path() / "lakecache-worker-XXXXXX").string();
    if (::mkdtemp(made.data()) == nullptr) {
      return Status::IoError("cannot make a folder for the worker's key: " +
                             std::string(std::strerror(errno)));
    }
    *temp_dir = folder = made;
  }
  WorkerIdentity identity;
  identity.key_path = folder + "/worker.key";
  identity.cert_path = folder + "/worker.crt";
  std::string key;
  {
    std::ifstream in(identity.key_path);
    std::stringstream text;
    text << in.rdbuf();
    key = text.str();
  }
  if (key.empty()) {
    LC_ASSIGN_OR_RETURN(key, security::GenerateKeyPem());
    LC_RETURN_IF_ERROR(security::WriteFileAtomically(identity.key_path, key, 0600));
  }
  Result<std::string> fingerprint = security::KeyFingerprint(key);
  if (!fingerprint.ok()) {
    return fingerprint.status().WithContext("the worker key " + identity.key_path +
                                            " is unusable (remove it to make a new one)");
  }
  identity.id = security::WorkerIdFromFingerprint(*fingerprint);
  return identity;
}

std::string WorkerServer::DigestsPath() const {
  return identity_.key_path.substr(0, identity_.key_path.rfind('/')) + "/worker.digests";
}

void WorkerServer::SaveDigests(const google::protobuf::RepeatedPtrField<rpc::RoleDigest>& tokens) {
  rpc::RoleDigests kept;
  *kept.mutable_tokens() = tokens;
  if (Status s = security::WriteFileAtomically(DigestsPath(), kept.SerializeAsString(), 0600);
      !s.ok()) {
    spdlog::warn("worker {}: {} (a restart asks the master again)", id_, s.message());
  }
}

bool WorkerServer::LoadDigests() {
  std::ifstream in(DigestsPath(), std::ios::binary);
  rpc::RoleDigests kept;
  if (!in || !kept.ParseFromIstream(&in) || kept.tokens().empty()) return false;
  authorizer_->Update(kept.tokens());
  return true;
}

bool WorkerServer::KeptCertificateUsable() {
  std::ifstream in(identity_.cert_path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return false;
  std::ifstream key_in(identity_.key_path);
  std::stringstream key;
  key << key_in.rdbuf();
  Result<security::CertificateInfo> cert = security::ParseCertificate(text.str());
  Result<std::string> fingerprint = security::KeyFingerprint(key.str());
  if (!cert.ok() || !fingerprint.ok() || cert->key_fingerprint != *fingerprint) return false;
  // Issued by this cluster's CA (the credentials may be another cluster's now).
  std::ifstream ca_in(credentials_->ca_path());
  std::stringstream ca;
  ca << ca_in.rdbuf();
  Result<bool> ours = security::SignedBy(text.str(), ca.str());
  if (!ours.ok() || !*ours) return false;
  if (cert->dns_names.empty() || cert->dns_names[0] != security::WorkerTlsName(id_)) return false;
  auto half = cert->not_before + (cert->not_after - cert->not_before) / 2;
  if (std::chrono::system_clock::now() >= half) return false;
  renew_at_ = half;
  return true;
}

Status WorkerServer::ObtainCertificate(std::chrono::system_clock::time_point deadline) {
  std::ifstream key_in(identity_.key_path);
  std::stringstream key;
  key << key_in.rdbuf();
  LC_ASSIGN_OR_RETURN(std::string csr, security::MakeCsr(key.str(), security::WorkerTlsName(id_)));
  MasterSet masters(MasterList(), [this](const std::string& address) {
    return credentials_->Channel(address, security::kMasterTlsName);
  });
  rpc::CertificateRequest request;
  request.set_csr_pem(csr);
  rpc::CertificateResponse response;
  // Any master issues certificates: each is waited for a while in turn until one answers.
  const auto turn = masters.addresses().size() == 1 ? std::chrono::hours(24) : kMasterCallTimeout;
  grpc::Status status;
  std::string asked;
  for (;;) {
    MasterSet::Master master = masters.Current();
    asked = master.address;
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);
    ctx.set_deadline(std::min(deadline, std::chrono::system_clock::now() + turn));
    status =
        rpc::MasterService::NewStub(master.channel)->IssueCertificate(&ctx, request, &response);
    if (status.ok() || !masters.Failed(master, status, ctx) ||
        std::chrono::system_clock::now() >= deadline) {
      break;
    }
  }
  if (!status.ok()) {
    Status failed = rpc::FromGrpcStatus(status, "master " + asked)
                        .WithContext("worker " + id_ + ": no certificate from the master");
    if (!failed.peer_failed()) return failed;  // refused: the message says why
    return Status(failed.code(), failed.message() + " (is the master running at " +
                                     options_.master + ", with --credentials of the same CA as " +
                                     credentials_->ca_path() + "?)");
  }
  if (response.worker_id() != id_) {
    return Status::Internal("the master named worker " + id_ + " '" + response.worker_id() + "'");
  }
  authorizer_->Update(response.tokens());
  SaveDigests(response.tokens());
  LC_RETURN_IF_ERROR(
      security::WriteFileAtomically(identity_.cert_path, response.certificate_pem(), 0644));
  auto not_after =
      std::chrono::system_clock::time_point(std::chrono::milliseconds(response.not_after_ms()));
  auto now = std::chrono::system_clock::now();
  renew_at_ = now + (not_after - now) / 2;
  spdlog::info("worker {}: certificate from master {} for {}, renewed in {} s", id_, asked,
               security::WorkerTlsName(id_),
               std::chrono::duration_cast<std::chrono::seconds>(renew_at_ - now).count());
  return Status::Ok();
}

}  // namespace lakecache
