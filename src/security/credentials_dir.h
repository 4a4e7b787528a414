// A cluster's credentials folder, as `lakecache cert` makes it (and as a Kubernetes Secret mounted
// as files holds it): the CA (`ca.crt` for every role, `ca.key` for the master only, which issues
// worker certificates), the master's serving certificate (`tls.crt`, `tls.key`) and one random
// token per role (`admin.token`, `client.token`, `worker.token`, `master.token`), and
// `metrics.token`, which reads only metrics and the master's status page (--metrics-listen beyond
// loopback). Keys and tokens
// are mode 0600, the folder 0700 when made here. Every file is written atomically (x509.h), so a
// reader never sees half a file. Not for concurrent use on the same folder.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace lakecache::security {

// The file names of a credentials folder.
inline constexpr char kCaCertFile[] = "ca.crt";
inline constexpr char kCaKeyFile[] = "ca.key";
inline constexpr char kTlsCertFile[] = "tls.crt";
inline constexpr char kTlsKeyFile[] = "tls.key";
inline constexpr const char* kTokenFiles[] = {"admin.token", "client.token", "worker.token",
                                              "master.token", "metrics.token"};

// The names every master serving certificate carries, before CredentialOptions::names.
inline constexpr const char* kMasterCertNames[] = {"lakecache-master", "localhost", "127.0.0.1"};

// Every role token starts with this, then 64 hex digits: a token that leaks into a log, an
// error or a test's output is easy to find (the test suite scans its output for it, as secret
// scanners do for such prefixes).
inline constexpr char kTokenPrefix[] = "lctok_";

struct CredentialOptions {
  std::vector<std::string> names;  // tls.crt's names after kMasterCertNames (DNS names or IPs)
  int days = 365;                  // validity of tls.crt
  int ca_days = 3650;              // validity of a new CA
  // Everything new: CA, tls.crt/tls.key and tokens, whatever the folder holds.
  bool force = false;
  // A new tls.key and tls.crt from the folder's CA (rotation), with the names of the old tls.crt
  // and `names`; a folder without its CA (ca.crt and ca.key) is an error. Not with `force`.
  bool renew = false;
};

// What UpdateCredentials did, by file name (never contents): written in the order written, kept
// in the order above.
struct CredentialsChange {
  std::vector<std::string> written;
  std::vector<std::string> kept;
};

// Creates `dir` (0700) and every file it lacks: an existing CA and tokens are kept unless
// `force`, an existing tls.crt/tls.key too unless `renew` or the CA is new. A CA half there
// (ca.key without ca.crt) is an error rather than replaced. Options are checked before anything
// is written (InvalidArgument naming the option).
Result<CredentialsChange> UpdateCredentials(const std::string& dir,
                                            const CredentialOptions& options);
// UpdateCredentials, for callers that only need to know it worked (tests, benchmarks).
Status MakeCredentials(const std::string& dir, const CredentialOptions& options = {});

}  // namespace lakecache::security
