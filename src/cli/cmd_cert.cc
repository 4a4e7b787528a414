// `lakecache cert`: makes a cluster's credentials folder, or renews its master certificate.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "security/x509.h"

namespace lakecache::cli {
namespace {

// "lakecache-master, localhost, 127.0.0.1; valid until 2027-01-02T03:04:05Z" for a written
// tls.crt; "" when it cannot be read back (the file was written: no reason to fail for this).
std::string DescribeCertificate(const std::string& path) {
  std::ifstream in(path);
  std::stringstream pem;
  pem << in.rdbuf();
  Result<security::CertificateInfo> info = security::ParseCertificate(pem.str());
  if (!info.ok()) return "";
  std::string names;
  for (const std::string& name : info->dns_names) names += (names.empty() ? "" : ", ") + name;
  auto until = std::chrono::system_clock::to_time_t(info->not_after);
  return " (" + names + "; valid until " + Iso8601(until) + ")";
}

}  // namespace

int RunCert(const CertRequest& req) {
  Result<security::CredentialsChange> change = security::UpdateCredentials(req.dir, req.options);
  if (!change.ok()) return ReportError(change.status());
  for (const std::string& name : change->written) {
    std::string path = req.dir + "/" + name;
    std::string about = name == security::kTlsCertFile ? DescribeCertificate(path) : "";
    std::printf("wrote %s%s\n", path.c_str(), about.c_str());
  }
  for (const std::string& name : change->kept) {
    std::printf("kept  %s/%s\n", req.dir.c_str(), name.c_str());
  }
  if (change->written.empty()) {
    std::printf(
        "nothing changed: %s holds every credential already (--renew issues a new tls.crt, "
        "--force makes everything new)\n",
        req.dir.c_str());
  }
  return kExitOk;
}

}  // namespace lakecache::cli
