#include "security/credentials_dir.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "security/x509.h"

namespace lakecache::security {
namespace {

constexpr std::chrono::hours kDay(24);

// A file to write: its name in the folder, what goes in it and its mode.
struct Pending {
  std::string name;
  std::string contents;
  mode_t mode;
};

class Folder {
 public:
  explicit Folder(std::string dir) : dir_(std::move(dir)) {}
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  bool Has(const std::string& name) const {
    std::error_code ec;
    return std::filesystem::is_regular_file(Path(name), ec);
  }
  Result<std::string> Read(const std::string& name) const {
    std::ifstream in(Path(name), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) return Status::IoError("cannot read " + Path(name));
    return text.str();
  }

 private:
  std::string dir_;
};

Status CheckOptions(const CredentialOptions& options) {
  if (options.force && options.renew) {
    return Status::InvalidArgument(
        "--renew keeps the CA and --force replaces it: give one of them");
  }
  if (options.days < 1) return Status::InvalidArgument("--days must be at least 1");
  if (options.ca_days < 1) return Status::InvalidArgument("the CA's validity must be >= 1 day");
  return Status::Ok();
}

// Makes `dir` mode 0700 (whatever the umask) unless it exists already.
Status MakeFolder(const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::is_directory(dir, ec)) return Status::Ok();
  std::filesystem::path parent = std::filesystem::path(dir).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (::mkdir(dir.c_str(), 0700) != 0 || ::chmod(dir.c_str(), 0700) != 0) {
    return Status::IoError("cannot create the folder " + dir + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

// The folder's CA, or a new one (then `fresh`) when the folder has none or `force`. A key
// without its certificate is refused: replacing it would orphan every certificate it issued.
Result<CertificateAuthority> LoadOrMakeCa(const Folder& folder, const CredentialOptions& options,
                                          bool* fresh) {
  bool has_cert = folder.Has(kCaCertFile), has_key = folder.Has(kCaKeyFile);
  *fresh = options.force || (!has_cert && !has_key && !options.renew);
  if (*fresh) {
    LC_ASSIGN_OR_RETURN(std::string id, RandomToken());
    return MakeCa("lakecache CA " + id.substr(0, 8), options.ca_days * kDay);
  }
  if (!has_cert) {
    return Status::NotFound(folder.Path(kCaCertFile) + " is missing" +
                            (has_key ? " but " + folder.Path(kCaKeyFile) +
                                           " is there: restore it, or make a new CA with --force"
                                     : ": --renew issues from the folder's CA"));
  }
  CertificateAuthority ca;
  LC_ASSIGN_OR_RETURN(ca.cert_pem, folder.Read(kCaCertFile));
  if (has_key) {
    LC_ASSIGN_OR_RETURN(ca.key_pem, folder.Read(kCaKeyFile));
  }
  return ca;
}

// tls.key and tls.crt: a new key, its CSR, and the CA's certificate for it.
Status IssueMasterCertificate(const CertificateAuthority& ca, const Folder& folder,
                              const CredentialOptions& options, std::vector<Pending>* out) {
  if (ca.key_pem.empty()) {
    return Status::NotFound("cannot issue " + folder.Path(kTlsCertFile) + ": " +
                            folder.Path(kCaKeyFile) +
                            " is missing (only the master's folder holds the CA key)");
  }
  std::vector<std::string> names(std::begin(kMasterCertNames), std::end(kMasterCertNames));
  std::vector<std::string> more = options.names;
  // A rotation keeps the names; a certificate that cannot be read is what it replaces.
  if (options.renew && folder.Has(kTlsCertFile)) {
    Result<std::string> old = folder.Read(kTlsCertFile);
    Result<CertificateInfo> info = old.ok() ? ParseCertificate(*old) : old.status();
    if (info.ok()) more.insert(more.end(), info->dns_names.begin(), info->dns_names.end());
  }
  for (const std::string& name : more) {
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  LC_ASSIGN_OR_RETURN(std::string key, GenerateKeyPem());
  LC_ASSIGN_OR_RETURN(std::string csr, MakeCsr(key, names[0]));
  Result<std::string> cert = SignCsr(ca, csr, names, options.days * kDay);
  if (!cert.ok()) return cert.status().WithContext(folder.Path(kTlsCertFile));
  // The key first: a reader that finds the new key with the old certificate sees they differ
  // and tries again, while the reverse would look like a broken certificate.
  out->push_back({kTlsKeyFile, std::move(key), 0600});
  out->push_back({kTlsCertFile, std::move(*cert), 0644});
  return Status::Ok();
}

// Everything the folder gets, in the order to write it, before anything is written.
Result<std::vector<Pending>> Plan(const Folder& folder, const CredentialOptions& options) {
  std::vector<Pending> plan;
  bool fresh_ca = false;
  LC_ASSIGN_OR_RETURN(CertificateAuthority ca, LoadOrMakeCa(folder, options, &fresh_ca));
  if (fresh_ca) {
    plan.push_back({kCaKeyFile, ca.key_pem, 0600});
    plan.push_back({kCaCertFile, ca.cert_pem, 0644});
  }
  if (fresh_ca || options.renew || !folder.Has(kTlsCertFile) || !folder.Has(kTlsKeyFile)) {
    LC_RETURN_IF_ERROR(IssueMasterCertificate(ca, folder, options, &plan));
  }
  for (const char* token_file : kTokenFiles) {
    if (!options.force && folder.Has(token_file)) continue;
    LC_ASSIGN_OR_RETURN(std::string token, RandomToken());
    plan.push_back({token_file, std::string(kTokenPrefix) + token + "\n", 0600});
  }
  return plan;
}

}  // namespace

Result<CredentialsChange> UpdateCredentials(const std::string& dir,
                                            const CredentialOptions& options) {
  LC_RETURN_IF_ERROR(CheckOptions(options));
  Folder folder(dir);
  LC_ASSIGN_OR_RETURN(std::vector<Pending> plan, Plan(folder, options));
  LC_RETURN_IF_ERROR(MakeFolder(dir));
  CredentialsChange change;
  for (const Pending& file : plan) {
    LC_RETURN_IF_ERROR(WriteFileAtomically(folder.Path(file.name), file.contents, file.mode));
    change.written.push_back(file.name);
  }
  std::vector<std::string> names = {kCaCertFile, kCaKeyFile, kTlsCertFile, kTlsKeyFile};
  names.insert(names.end(), std::begin(kTokenFiles), std::end(kTokenFiles));
  for (const std::string& name : names) {
    bool written =
        std::find(change.written.begin(), change.written.end(), name) != change.written.end();
    if (!written && folder.Has(name)) change.kept.push_back(name);
  }
  return change;
}

Status MakeCredentials(const std::string& dir, const CredentialOptions& options) {
  return UpdateCredentials(dir, options).status();
}

}  // namespace lakecache::security
