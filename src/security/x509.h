// The cluster's certificates: EC P-256 keys, certificate requests (CSRs), a CA that issues
// certificates for the keys of CSRs, and the few facts a node reads back from a certificate
// (names, key fingerprint, validity). Also the role tokens and the atomic file writes that put
// either into a credentials folder (credentials_dir.h).
//
// Everything is PEM text in std::string; nothing here keeps state, so every function is safe to
// call from any thread. Errors say what was wrong and which input or file; they never contain
// key material or tokens.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/result.h"

namespace lakecache::security {

// A fresh EC P-256 private key, PKCS#8 PEM.
Result<std::string> GenerateKeyPem();

// Hex SHA-256 of the DER SubjectPublicKeyInfo of the key / of the public key in a CSR / in a
// certificate (CertificateInfo::key_fingerprint): 64 lowercase hex characters, the same for the
// same key in all three.
Result<std::string> KeyFingerprint(const std::string& private_key_pem);
Result<std::string> CsrFingerprint(const std::string& csr_pem);

// A PKCS#10 CSR for the key, subject CN=common_name, signed by the key (proof of possession).
Result<std::string> MakeCsr(const std::string& private_key_pem, const std::string& common_name);

struct CertificateAuthority {
  std::string cert_pem;
  std::string key_pem;
};

// A new self-signed CA: CN=`name`, basicConstraints CA:TRUE (critical), keyUsage keyCertSign and
// cRLSign (critical), valid for `validity` from now, not-before 5 minutes in the past (clock
// skew between nodes).
Result<CertificateAuthority> MakeCa(const std::string& name, std::chrono::seconds validity);

// Issues a certificate for the public key of `csr_pem` once the CSR's signature checks out
// (otherwise InvalidArgument "the certificate request is not signed by its key"). Nothing else of
// the CSR is used: subject CN=dns_names[0]; subjectAltName DNS:NAME for each name, plus IP:NAME
// for a name that is an IPv4 or IPv6 address; basicConstraints CA:FALSE; keyUsage
// digitalSignature; extendedKeyUsage serverAuth and clientAuth; a random 128-bit serial;
// not-before 5 minutes ago, not-after `validity` from now.
// REQUIRES: dns_names is not empty, each a DNS name (letters, digits, '-', '.', '_', '*') or an
// IP address (InvalidArgument otherwise).
Result<std::string> SignCsr(const CertificateAuthority& ca, const std::string& csr_pem,
                            const std::vector<std::string>& dns_names,
                            std::chrono::seconds validity);

struct CertificateInfo {
  std::vector<std::string> dns_names;  // DNS SANs, in the certificate's order
  std::string key_fingerprint;         // as KeyFingerprint
  std::chrono::system_clock::time_point not_before, not_after;
};
Result<CertificateInfo> ParseCertificate(const std::string& cert_pem);

// Whether one of the CA certificates in `ca_bundle_pem` (one or more PEM certificates: a CA
// being rotated) signed `cert_pem`. Checks the signature only, not names or validity.
Result<bool> SignedBy(const std::string& cert_pem, const std::string& ca_bundle_pem);

// 32 random bytes (RAND_bytes) as 64 lowercase hex characters: a role token.
Result<std::string> RandomToken();

// Writes `contents` to `path` through PATH.tmp (created afresh with `mode`, e.g. 0600, whatever
// the umask), fsync, a rename and an fsync of the folder: a reader sees the old file or the whole
// new one, and the new one survives a crash once this returns.
Status WriteFileAtomically(const std::string& path, const std::string& contents, mode_t mode);

}  // namespace lakecache::security
