#include "security/x509.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <memory>

#include "rpc/tls.h"

namespace lakecache::security {
namespace {

template <typename T, void (*Free)(T*)>
struct Freer {
  void operator()(T* p) const { Free(p); }
};
using Bio = std::unique_ptr<BIO, Freer<BIO, BIO_free_all>>;
using Key = std::unique_ptr<EVP_PKEY, Freer<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Freer<X509, X509_free>>;
using Request = std::unique_ptr<X509_REQ, Freer<X509_REQ, X509_REQ_free>>;
using BigNum = std::unique_ptr<BIGNUM, Freer<BIGNUM, BN_free>>;
using Extension = std::unique_ptr<X509_EXTENSION, Freer<X509_EXTENSION, X509_EXTENSION_free>>;
using Names = std::unique_ptr<GENERAL_NAMES, Freer<GENERAL_NAMES, GENERAL_NAMES_free>>;

constexpr long kSkewSeconds = 5 * 60;  // not-before this far in the past: nodes' clocks differ

// Never prompts for a passphrase: an encrypted key is refused instead.
int NoPassphrase(char*, int, int, void*) { return -1; }

Status Failed(const std::string& what) {
  return Status::InvalidArgument(what + ": " + rpc::TlsErrors());
}

std::string Hex(const unsigned char* bytes, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[bytes[i] >> 4];
    out += kDigits[bytes[i] & 0xf];
  }
  return out;
}

Bio ReadBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, n > 0 ? static_cast<size_t>(n) : 0);
}

// Reads one PEM object with OpenSSL's `Read` (PEM_read_bio_X509, ...) into a `Ptr`; the error
// says `what` it was (never the text).
template <typename Ptr, auto Read>
Result<Ptr> ReadPem(const std::string& pem, const std::string& what) {
  ERR_clear_error();
  Bio bio = ReadBio(pem);
  Ptr object(Read(bio.get(), nullptr, NoPassphrase, nullptr));
  if (!object) return Failed("cannot read " + what);
  return object;
}

Result<Key> ReadKey(const std::string& pem, const std::string& what) {
  return ReadPem<Key, PEM_read_bio_PrivateKey>(pem, what + " (a PEM private key)");
}
Result<Cert> ReadCert(const std::string& pem, const std::string& what) {
  return ReadPem<Cert, PEM_read_bio_X509>(pem, what + " (a PEM certificate)");
}
Result<Request> ReadCsr(const std::string& pem) {
  return ReadPem<Request, PEM_read_bio_X509_REQ>(pem, "the certificate request (a PEM CSR)");
}

template <typename Writer>
Result<std::string> Pem(Writer write, const std::string& what) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || write(bio.get()) != 1) return Status::Internal("cannot write " + what + " as PEM");
  return BioText(bio.get());
}

Result<std::string> PublicKeyFingerprint(EVP_PKEY* key) {
  if (key == nullptr) return Status::InvalidArgument("no public key");
  unsigned char* der = nullptr;
  int n = i2d_PUBKEY(key, &der);
  if (n <= 0) return Failed("cannot encode the public key");
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  int ok = EVP_Digest(der, static_cast<size_t>(n), digest, &size, EVP_sha256(), nullptr);
  OPENSSL_free(der);
  if (ok != 1) return Failed("cannot hash the public key");
  return Hex(digest, size);
}

Status SetCommonName(X509_NAME* name, const std::string& common_name) {
  const auto* text = reinterpret_cast<const unsigned char*>(common_name.c_str());
  if (X509_NAME_add_entry_by_NID(name, NID_commonName, MBSTRING_UTF8, text, -1, -1, 0) != 1) {
    return Failed("the common name '" + common_name + "' is unusable");
  }
  return Status::Ok();
}

// Version 3, a random positive 128-bit serial, subject CN=common_name, the key, and the validity.
Result<Cert> NewCertificate(const std::string& common_name, EVP_PKEY* key,
                            std::chrono::seconds validity) {
  if (validity.count() <= 0) return Status::InvalidArgument("a certificate's validity must be > 0");
  Cert cert(X509_new());
  unsigned char serial[16];
  if (!cert || X509_set_version(cert.get(), X509_VERSION_3) != 1 ||
      RAND_bytes(serial, sizeof(serial)) != 1) {
    return Status::Internal("cannot make a certificate: " + rpc::TlsErrors());
  }
  serial[0] |= 0x01;  // never zero
  BigNum number(BN_bin2bn(serial, sizeof(serial), nullptr));
  std::time_t now = std::time(nullptr);
  if (!number || BN_to_ASN1_INTEGER(number.get(), X509_get_serialNumber(cert.get())) == nullptr ||
      ASN1_TIME_adj(X509_getm_notBefore(cert.get()), now, 0, -kSkewSeconds) == nullptr ||
      ASN1_TIME_adj(X509_getm_notAfter(cert.get()), now, 0, validity.count()) == nullptr ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return Status::Internal("cannot make a certificate: " + rpc::TlsErrors());
  }
  LC_RETURN_IF_ERROR(SetCommonName(X509_get_subject_name(cert.get()), common_name));
  return cert;
}

// Adds the extension `nid` = `value` (OpenSSL's config syntax: "critical,CA:TRUE").
Status AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  Extension ext(X509V3_EXT_nconf_nid(nullptr, &ctx, nid, value));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1) {
    return Status::Internal(std::string("cannot add the extension ") + OBJ_nid2sn(nid) + ": " +
                            rpc::TlsErrors());
  }
  return Status::Ok();
}

Status Sign(X509* cert, EVP_PKEY* key) {
  if (X509_sign(cert, key, EVP_sha256()) <= 0) return Failed("cannot sign the certificate");
  return Status::Ok();
}

bool IsDnsName(const std::string& name) {
  if (name.empty() || name.size() > 253) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.' || c == '_' || c == '*';
    if (!ok) return false;
  }
  return true;
}

// The address bytes of `name` when it is an IPv4 or IPv6 address; empty otherwise.
std::string IpBytes(const std::string& name) {
  unsigned char bytes[16];
  if (::inet_pton(AF_INET, name.c_str(), bytes) == 1) return std::string(bytes, bytes + 4);
  if (::inet_pton(AF_INET6, name.c_str(), bytes) == 1) return std::string(bytes, bytes + 16);
  return "";
}

bool PushName(GENERAL_NAMES* names, int type, const std::string& value) {
  ASN1_STRING* text =
      ASN1_STRING_type_new(type == GEN_DNS ? V_ASN1_IA5STRING : V_ASN1_OCTET_STRING);
  GENERAL_NAME* name = GENERAL_NAME_new();
  if (text == nullptr || name == nullptr ||
      ASN1_STRING_set(text, value.data(), static_cast<int>(value.size())) != 1) {
    ASN1_STRING_free(text);
    GENERAL_NAME_free(name);
    return false;
  }
  GENERAL_NAME_set0_value(name, type, text);
  if (sk_GENERAL_NAME_push(names, name) <= 0) {
    GENERAL_NAME_free(name);
    return false;
  }
  return true;
}

// subjectAltName: DNS:NAME for every name, and IP:NAME as well for an address.
Status AddAltNames(X509* cert, const std::vector<std::string>& dns_names) {
  Names names(sk_GENERAL_NAME_new_null());
  if (!names) return Status::Internal("cannot make the certificate's names");
  for (const std::string& name : dns_names) {
    std::string ip = IpBytes(name);
    if (ip.empty() && !IsDnsName(name)) {
      return Status::InvalidArgument("certificate name '" + name +
                                     "' is neither a DNS name nor an IP address");
    }
    if (!PushName(names.get(), GEN_DNS, name) ||
        (!ip.empty() && !PushName(names.get(), GEN_IPADD, ip))) {
      return Status::Internal("cannot make the certificate's names");
    }
  }
  if (X509_add1_ext_i2d(cert, NID_subject_alt_name, names.get(), 0, X509V3_ADD_DEFAULT) != 1) {
    return Status::Internal("cannot add the certificate's names: " + rpc::TlsErrors());
  }
  return Status::Ok();
}

std::chrono::system_clock::time_point TimeOf(const ASN1_TIME* time) {
  std::tm tm{};
  if (time == nullptr || ASN1_TIME_to_tm(time, &tm) != 1) return {};
  return std::chrono::system_clock::from_time_t(::timegm(&tm));
}

std::vector<std::string> DnsNamesOf(X509* cert) {
  std::vector<std::string> out;
  Names names(
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr)));
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
    if (name->type != GEN_DNS) continue;
    const ASN1_IA5STRING* dns = name->d.dNSName;
    out.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(dns)),
                     static_cast<size_t>(ASN1_STRING_length(dns)));
  }
  return out;
}

Status ErrnoStatus(const std::string& what) {
  return Status::IoError(what + ": " + std::strerror(errno));
}

Status WriteFd(int fd, const std::string& contents, const std::string& path) {
  for (size_t done = 0; done < contents.size();) {
    ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("cannot write " + path);
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return ErrnoStatus("cannot fsync " + path);
  return Status::Ok();
}

Status FsyncFolderOf(const std::string& path) {
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open " + dir);
  Status st = ::fsync(fd) == 0 ? Status::Ok() : ErrnoStatus("cannot fsync " + dir);
  ::close(fd);
  return st;
}

}  // namespace

Result<std::string> GenerateKeyPem() {
  ERR_clear_error();
  Key key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) return Status::Internal("cannot generate an EC P-256 key: " + rpc::TlsErrors());
  return Pem(
      [&](BIO* bio) {
        return PEM_write_bio_PrivateKey(bio, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
      },
      "the private key");
}

Result<std::string> KeyFingerprint(const std::string& private_key_pem) {
  LC_ASSIGN_OR_RETURN(Key key, ReadKey(private_key_pem, "the private key"));
  return PublicKeyFingerprint(key.get());
}

Result<std::string> CsrFingerprint(const std::string& csr_pem) {
  LC_ASSIGN_OR_RETURN(Request csr, ReadCsr(csr_pem));
  return PublicKeyFingerprint(X509_REQ_get0_pubkey(csr.get()));
}

Result<std::string> MakeCsr(const std::string& private_key_pem, const std::string& common_name) {
  LC_ASSIGN_OR_RETURN(Key key, ReadKey(private_key_pem, "the private key"));
  Request csr(X509_REQ_new());
  if (!csr || X509_REQ_set_version(csr.get(), X509_REQ_VERSION_1) != 1 ||
      X509_REQ_set_pubkey(csr.get(), key.get()) != 1) {
    return Status::Internal("cannot make a certificate request: " + rpc::TlsErrors());
  }
  LC_RETURN_IF_ERROR(SetCommonName(X509_REQ_get_subject_name(csr.get()), common_name));
  if (X509_REQ_sign(csr.get(), key.get(), EVP_sha256()) <= 0) {
    return Failed("cannot sign the certificate request");
  }
  return Pem([&](BIO* bio) { return PEM_write_bio_X509_REQ(bio, csr.get()); },
             "the certificate request");
}

Result<CertificateAuthority> MakeCa(const std::string& name, std::chrono::seconds validity) {
  CertificateAuthority ca;
  LC_ASSIGN_OR_RETURN(ca.key_pem, GenerateKeyPem());
  LC_ASSIGN_OR_RETURN(Key key, ReadKey(ca.key_pem, "the CA key"));
  LC_ASSIGN_OR_RETURN(Cert cert, NewCertificate(name, key.get(), validity));
  X509* x = cert.get();
  if (X509_set_issuer_name(x, X509_get_subject_name(x)) != 1) return Failed("cannot name the CA");
  LC_RETURN_IF_ERROR(AddExtension(x, x, NID_basic_constraints, "critical,CA:TRUE"));
  LC_RETURN_IF_ERROR(AddExtension(x, x, NID_key_usage, "critical,keyCertSign,cRLSign"));
  LC_RETURN_IF_ERROR(AddExtension(x, x, NID_subject_key_identifier, "hash"));
  LC_RETURN_IF_ERROR(Sign(x, key.get()));
  LC_ASSIGN_OR_RETURN(ca.cert_pem,
                      Pem([&](BIO* bio) { return PEM_write_bio_X509(bio, x); }, "the CA"));
  return ca;
}

Result<std::string> SignCsr(const CertificateAuthority& ca, const std::string& csr_pem,
                            const std::vector<std::string>& dns_names,
                            std::chrono::seconds validity) {
  if (dns_names.empty()) return Status::InvalidArgument("a certificate needs at least one name");
  LC_ASSIGN_OR_RETURN(Request csr, ReadCsr(csr_pem));
  EVP_PKEY* key = X509_REQ_get0_pubkey(csr.get());
  if (key == nullptr || X509_REQ_verify(csr.get(), key) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument("the certificate request is not signed by its key");
  }
  LC_ASSIGN_OR_RETURN(Cert issuer, ReadCert(ca.cert_pem, "the CA certificate"));
  LC_ASSIGN_OR_RETURN(Key issuer_key, ReadKey(ca.key_pem, "the CA key"));
  if (X509_check_private_key(issuer.get(), issuer_key.get()) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument("the CA key is not the key of the CA certificate");
  }
  LC_ASSIGN_OR_RETURN(Cert cert, NewCertificate(dns_names[0], key, validity));
  X509* x = cert.get();
  if (X509_set_issuer_name(x, X509_get_subject_name(issuer.get())) != 1) {
    return Failed("cannot name the issuer");
  }
  LC_RETURN_IF_ERROR(AddAltNames(x, dns_names));
  LC_RETURN_IF_ERROR(AddExtension(x, issuer.get(), NID_basic_constraints, "critical,CA:FALSE"));
  LC_RETURN_IF_ERROR(AddExtension(x, issuer.get(), NID_key_usage, "critical,digitalSignature"));
  LC_RETURN_IF_ERROR(AddExtension(x, issuer.get(), NID_ext_key_usage, "serverAuth,clientAuth"));
  LC_RETURN_IF_ERROR(AddExtension(x, issuer.get(), NID_subject_key_identifier, "hash"));
  LC_RETURN_IF_ERROR(AddExtension(x, issuer.get(), NID_authority_key_identifier, "keyid:always"));
  LC_RETURN_IF_ERROR(Sign(x, issuer_key.get()));
  return Pem([&](BIO* bio) { return PEM_write_bio_X509(bio, x); }, "the certificate");
}

Result<CertificateInfo> ParseCertificate(const std::string& cert_pem) {
  LC_ASSIGN_OR_RETURN(Cert cert, ReadCert(cert_pem, "the certificate"));
  CertificateInfo info;
  info.dns_names = DnsNamesOf(cert.get());
  LC_ASSIGN_OR_RETURN(info.key_fingerprint, PublicKeyFingerprint(X509_get0_pubkey(cert.get())));
  info.not_before = TimeOf(X509_get0_notBefore(cert.get()));
  info.not_after = TimeOf(X509_get0_notAfter(cert.get()));
  return info;
}

Result<bool> SignedBy(const std::string& cert_pem, const std::string& ca_bundle_pem) {
  LC_ASSIGN_OR_RETURN(Cert cert, ReadCert(cert_pem, "the certificate"));
  Bio bio = ReadBio(ca_bundle_pem);
  bool any = false;
  for (;;) {
    Cert ca(PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr));
    if (!ca) break;
    any = true;
    if (X509_verify(cert.get(), X509_get0_pubkey(ca.get())) == 1) {
      ERR_clear_error();
      return true;
    }
  }
  ERR_clear_error();
  if (!any) return Status::InvalidArgument("cannot read the CA certificates (PEM)");
  return false;
}

Result<std::string> RandomToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    return Status::Internal("cannot draw random bytes: " + rpc::TlsErrors());
  }
  return Hex(bytes, sizeof(bytes));
}

Status WriteFileAtomically(const std::string& path, const std::string& contents, mode_t mode) {
  std::string tmp = path + ".tmp";
  // Made afresh (a leftover could have another mode or owner), never through a link.
  if (::unlink(tmp.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("cannot remove " + tmp);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoStatus("cannot create " + tmp);
  Status st = ::fchmod(fd, mode) == 0 ? WriteFd(fd, contents, tmp) : ErrnoStatus("chmod " + tmp);
  if (::close(fd) != 0 && st.ok()) st = ErrnoStatus("cannot close " + tmp);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    st = ErrnoStatus("cannot rename " + tmp + " to " + path);
  }
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  return FsyncFolderOf(path);
}

}  // namespace lakecache::security
