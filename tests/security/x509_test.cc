#include "security/x509.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "support/process.h"
#include "support/test_data.h"
#include "support/test_servers.h"
#include "support/wait_for.h"

namespace lakecache::security {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;

constexpr hours kDay(24);

template <typename T>
T Must(Result<T> result) {
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return result.ok() ? std::move(result).value() : T{};
}

class X509Test : public ::testing::Test {
 protected:
  void SetUp() override { ca_ = Must(MakeCa("test CA", 30 * kDay)); }

  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_.path() + "/" + name;
    EXPECT_TRUE(testing::WriteFile(path, text).ok());
    return path;
  }

  // `openssl ARGS...`, stdout and stderr together.
  static testing::RunResult Openssl(std::vector<std::string> args) {
    args.insert(args.begin(), "openssl");
    testing::RunResult r = testing::RunCommand(args);
    r.out += r.err;
    return r;
  }

  // `openssl x509 -noout -ext NAME` of the certificate: the extension as openssl prints it.
  std::string Extension(const std::string& cert_pem, const std::string& name) {
    return Openssl({"x509", "-noout", "-ext", name, "-in", Write("ext.pem", cert_pem)}).out;
  }

  // A certificate from `ca` for a new key, with `names`.
  static std::string Issue(const CertificateAuthority& ca, const std::vector<std::string>& names) {
    std::string key = Must(GenerateKeyPem());
    return Must(SignCsr(ca, Must(MakeCsr(key, "anything")), names, kDay));
  }

  testing::TempDir dir_;
  CertificateAuthority ca_;
};

TEST_F(X509Test, SignedCsrVerifiesWithOpensslAndCarriesExactlyTheNamesGiven) {
  const std::vector<std::string> names = {"worker-1.lakecache", "localhost", "127.0.0.1", "::1"};
  std::string key = Must(GenerateKeyPem());
  std::string cert = Must(SignCsr(ca_, Must(MakeCsr(key, "asks-for-this-name")), names, kDay));
  testing::RunResult verify =
      Openssl({"verify", "-CAfile", Write("ca.crt", ca_.cert_pem), Write("tls.crt", cert)});
  EXPECT_EQ(verify.exit_code, 0) << verify.out;
  EXPECT_NE(verify.out.find(": OK"), std::string::npos) << verify.out;

  EXPECT_EQ(Must(ParseCertificate(cert)).dns_names, names);
  std::string san = Extension(cert, "subjectAltName");
  for (const char* part : {"DNS:worker-1.lakecache", "DNS:localhost", "DNS:127.0.0.1",
                           "IP Address:127.0.0.1", "IP Address:0:0:0:0:0:0:0:1"}) {
    EXPECT_NE(san.find(part), std::string::npos) << part << "\n" << san;
  }
  EXPECT_EQ(san.find("IP Address:localhost"), std::string::npos) << san;
  // What the CSR asked for besides its key counts for nothing: the CN is the first name.
  std::string subject = Openssl({"x509", "-noout", "-subject", "-in", Write("s.pem", cert)}).out;
  EXPECT_NE(subject.find("CN = worker-1.lakecache"), std::string::npos) << subject;
  EXPECT_NE(Extension(cert, "basicConstraints").find("CA:FALSE"), std::string::npos);
  EXPECT_NE(Extension(cert, "extendedKeyUsage")
                .find("TLS Web Server Authentication, TLS Web Client Authentication"),
            std::string::npos)
      << Extension(cert, "extendedKeyUsage");
}

TEST_F(X509Test, FingerprintsOfKeyCsrAndCertificateAgree) {
  std::string key = Must(GenerateKeyPem());
  std::string csr = Must(MakeCsr(key, "worker-1"));
  std::string cert = Must(SignCsr(ca_, csr, {"worker-1"}, kDay));
  std::string fingerprint = Must(KeyFingerprint(key));
  ASSERT_EQ(fingerprint.size(), 64u);
  EXPECT_TRUE(std::all_of(fingerprint.begin(), fingerprint.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  })) << fingerprint;
  EXPECT_EQ(Must(CsrFingerprint(csr)), fingerprint);
  EXPECT_EQ(Must(ParseCertificate(cert)).key_fingerprint, fingerprint);
  EXPECT_NE(Must(KeyFingerprint(Must(GenerateKeyPem()))), fingerprint);
  // openssl agrees: SHA-256 of the DER SubjectPublicKeyInfo.
  std::string der = dir_.path() + "/pub.der";
  ASSERT_EQ(Openssl({"pkey", "-in", Write("k.pem", key), "-pubout", "-outform", "DER", "-out", der})
                .exit_code,
            0);
  EXPECT_NE(Openssl({"dgst", "-sha256", der}).out.find(fingerprint), std::string::npos);
}

// The CSR's DER with `from` replaced by `to` (same length), as PEM: a body its signature no
// longer covers.
std::string Tampered(const std::string& csr_pem, const std::string& from, const std::string& to) {
  BIO* in = BIO_new_mem_buf(csr_pem.data(), static_cast<int>(csr_pem.size()));
  X509_REQ* csr = PEM_read_bio_X509_REQ(in, nullptr, nullptr, nullptr);
  BIO_free(in);
  unsigned char* der = nullptr;
  int n = i2d_X509_REQ(csr, &der);
  X509_REQ_free(csr);
  std::string bytes(reinterpret_cast<char*>(der), n > 0 ? static_cast<size_t>(n) : 0);
  OPENSSL_free(der);
  size_t at = bytes.find(from);
  EXPECT_NE(at, std::string::npos);
  if (at != std::string::npos) bytes.replace(at, from.size(), to);
  BIO* out = BIO_new(BIO_s_mem());
  PEM_write_bio(out, "CERTIFICATE REQUEST", "", reinterpret_cast<unsigned char*>(bytes.data()),
                static_cast<long>(bytes.size()));
  char* text = nullptr;
  long size = BIO_get_mem_data(out, &text);
  std::string pem(text, static_cast<size_t>(size));
  BIO_free(out);
  return pem;
}

TEST_F(X509Test, CsrWithATamperedBodyIsRefused) {
  std::string csr = Must(MakeCsr(Must(GenerateKeyPem()), "honest-node"));
  std::string tampered = Tampered(csr, "honest-node", "forged-node");
  ASSERT_NE(tampered, csr);
  EXPECT_TRUE(CsrFingerprint(tampered).ok()) << "the tampered CSR should still parse";
  Result<std::string> cert = SignCsr(ca_, tampered, {"forged-node"}, kDay);
  ASSERT_FALSE(cert.ok());
  EXPECT_EQ(cert.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cert.status().message(), "the certificate request is not signed by its key");
  EXPECT_TRUE(SignCsr(ca_, csr, {"honest-node"}, kDay).ok());
}

TEST_F(X509Test, CertificateOfAnotherCaFailsOpensslVerify) {
  CertificateAuthority other = Must(MakeCa("test CA", 30 * kDay));  // same name, other key
  std::string cert = Issue(other, {"localhost"});
  testing::RunResult verify =
      Openssl({"verify", "-CAfile", Write("ca.crt", ca_.cert_pem), Write("tls.crt", cert)});
  EXPECT_NE(verify.exit_code, 0) << verify.out;
  EXPECT_EQ(Openssl({"verify", "-CAfile", Write("other.crt", other.cert_pem), Write("o.crt", cert)})
                .exit_code,
            0);
}

TEST_F(X509Test, CaIsACriticalCaForSigningCertificatesOnly) {
  EXPECT_NE(Extension(ca_.cert_pem, "basicConstraints").find("critical\n    CA:TRUE"),
            std::string::npos)
      << Extension(ca_.cert_pem, "basicConstraints");
  EXPECT_NE(Extension(ca_.cert_pem, "keyUsage").find("critical\n    Certificate Sign, CRL Sign"),
            std::string::npos)
      << Extension(ca_.cert_pem, "keyUsage");
  std::string subject =
      Openssl({"x509", "-noout", "-subject", "-in", Write("ca.pem", ca_.cert_pem)}).out;
  EXPECT_NE(subject.find("CN = test CA"), std::string::npos) << subject;
  // A CA key that is not the CA certificate's issues nothing.
  CertificateAuthority mixed{ca_.cert_pem, Must(GenerateKeyPem())};
  std::string csr = Must(MakeCsr(Must(GenerateKeyPem()), "x"));
  EXPECT_EQ(SignCsr(mixed, csr, {"x"}, kDay).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(X509Test, ValidityStartsFiveMinutesAgoForSkewedClocks) {
  auto now = std::chrono::system_clock::now();
  CertificateInfo ca = Must(ParseCertificate(ca_.cert_pem));
  CertificateInfo leaf = Must(ParseCertificate(Issue(ca_, {"localhost"})));
  for (const CertificateInfo& info : {ca, leaf}) {
    EXPECT_LT(info.not_before, now - minutes(4));
    EXPECT_GT(info.not_before, now - minutes(6));
  }
  // Their lifetimes count from when they were made, around `now` (key generation may be slow).
  EXPECT_LT(ca.not_after - now - 30 * kDay, testing::kWaitTimeout);
  EXPECT_GT(ca.not_after - now - 30 * kDay, -testing::kWaitTimeout);
  EXPECT_LT(leaf.not_after - now - kDay, testing::kWaitTimeout);
  EXPECT_GT(leaf.not_after - now - kDay, -testing::kWaitTimeout);
  EXPECT_FALSE(MakeCa("x", seconds(0)).ok());
}

TEST_F(X509Test, SerialsAreRandomAnd128Bits) {
  auto serial = [&](const std::string& cert) {
    std::string out = Openssl({"x509", "-noout", "-serial", "-in", Write("c.pem", cert)}).out;
    return out.substr(out.find('=') + 1, out.find('\n') - out.find('=') - 1);
  };
  std::string a = serial(Issue(ca_, {"a"})), b = serial(Issue(ca_, {"a"}));
  EXPECT_NE(a, b);
  EXPECT_GT(a.size(), 24u) << a;  // 128 random bits: shorter than 25 hex digits is ~2^-32
  EXPECT_LE(a.size(), 32u) << a;
}

TEST_F(X509Test, NamesThatAreNeitherDnsNamesNorAddressesAreRefused) {
  std::string csr = Must(MakeCsr(Must(GenerateKeyPem()), "x"));
  for (const std::string& bad : {std::string("two words"), std::string("a,DNS:evil"),
                                 std::string(""), std::string("x\ny")}) {
    Result<std::string> cert = SignCsr(ca_, csr, {"localhost", bad}, kDay);
    EXPECT_EQ(cert.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(SignCsr(ca_, csr, {}, kDay).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(X509Test, ErrorsNeverShowKeyMaterial) {
  std::string key = Must(GenerateKeyPem());
  std::string broken = key.substr(0, key.size() / 2);  // cut mid-key
  Result<std::string> fingerprint = KeyFingerprint(broken);
  ASSERT_FALSE(fingerprint.ok());
  std::string body_line = key.substr(key.find('\n') + 1, 40);
  EXPECT_EQ(fingerprint.status().message().find(body_line), std::string::npos);
  EXPECT_EQ(fingerprint.status().message().find("BEGIN"), std::string::npos);
  EXPECT_NE(fingerprint.status().message().find("private key"), std::string::npos)
      << fingerprint.status().message();
  CertificateAuthority broken_ca{ca_.cert_pem, broken};
  Result<std::string> cert = SignCsr(broken_ca, Must(MakeCsr(key, "x")), {"x"}, kDay);
  ASSERT_FALSE(cert.ok());
  EXPECT_NE(cert.status().message().find("the CA key"), std::string::npos);
  EXPECT_EQ(cert.status().message().find(body_line), std::string::npos);
}

TEST(RandomTokenTest, IsSixtyFourHexDigitsAndNeverRepeats) {
  std::string a = Must(RandomToken()), b = Must(RandomToken());
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);
}

TEST(WriteFileAtomicallyTest, ReplacesTheFileWithTheModeGivenWhateverTheUmask) {
  testing::TempDir dir;
  std::string path = dir.path() + "/token";
  mode_t old_umask = ::umask(0077);
  ASSERT_TRUE(WriteFileAtomically(path, "first\n", 0644).ok());
  ::umask(old_umask);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  ASSERT_TRUE(WriteFileAtomically(path, "second\n", 0600).ok());
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(testing::ReadWholeFile(path).bytes, "second\n");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  // A leftover PATH.tmp (a crash mid-write) does not stand in the way.
  ASSERT_TRUE(testing::WriteFile(path + ".tmp", "stale").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "third\n", 0600).ok());
  EXPECT_EQ(testing::ReadWholeFile(path).bytes, "third\n");
  Status missing = WriteFileAtomically(dir.path() + "/no/such/file", "x", 0600);
  EXPECT_EQ(missing.code(), StatusCode::kIoError);
  EXPECT_NE(missing.message().find(dir.path() + "/no/such/file.tmp"), std::string::npos)
      << missing.message();
}

// A kept certificate is used again only when this cluster's CA (or one of a bundle, while a CA
// is rotated) signed it.
TEST_F(X509Test, SignedByTellsTheIssuingCaFromAnother) {
  CertificateAuthority other = Must(MakeCa("other CA", 30 * kDay));
  std::string cert = Issue(ca_, {"w.worker.lakecache"});
  EXPECT_TRUE(Must(SignedBy(cert, ca_.cert_pem)));
  EXPECT_FALSE(Must(SignedBy(cert, other.cert_pem)));
  EXPECT_TRUE(Must(SignedBy(cert, other.cert_pem + ca_.cert_pem)));
  EXPECT_FALSE(SignedBy(cert, "not a certificate").ok());
}

}  // namespace
}  // namespace lakecache::security
