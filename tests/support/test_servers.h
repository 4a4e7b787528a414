// Real S3 servers for integration tests: s3rver (fast, lenient) and OpenStack Swift with s3api
// (strict: verifies SigV4, real multipart ETags, correct paging and ranges).
//
// Each server listens on a free 127.0.0.1 port, keeps its data and logs in its own TempDir and is
// stopped (with its whole process group) by its destructor. Setup helpers (CreateBucket,
// PutObjects) use curl's own SigV4 signing, so they do not depend on the S3 client under test. A
// server object is not thread-safe; share it read-only (endpoint, credentials) across threads.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/config.h"
#include "common/result.h"
#include "common/status.h"
#include "support/process.h"

namespace lakecache::testing {

// A port that was free on 127.0.0.1 a moment ago (bind to port 0, read it, close); -1 on error.
int FreeLoopbackPort();

// A TCP listener on 127.0.0.1 that never accepts: the kernel completes connections into its backlog
// and nothing ever answers them, as behind a proxy that drops requests or a half-open load
// balancer. Also a port in use. Closed by its destructor.
class SilentListener {
 public:
  static Result<std::unique_ptr<SilentListener>> Start();
  ~SilentListener();
  SilentListener(const SilentListener&) = delete;
  SilentListener& operator=(const SilentListener&) = delete;

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  SilentListener(int fd, int port) : fd_(fd), port_(port) {}
  int fd_;
  int port_;
};

// A fresh directory under `base` (empty: $TMPDIR, or /tmp), removed with its contents on
// destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "lakecache-test", const std::string& base = "");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Writes `content` to `path`, replacing the file.
Status WriteFile(const std::string& path, const std::string& content);

// A namespace `name` over the local folder `dir` (file://), with cache blocks of `block_size`.
NamespaceConfig LocalNamespace(const std::string& name, const std::string& dir,
                               uint64_t block_size);

// A self-signed certificate for 127.0.0.1 (subjectAltName IP:127.0.0.1), made with the openssl CLI.
// The certificate also serves as the CA file clients pass (curl --cacert).
struct TlsFiles {
  std::string key_path;
  std::string cert_path;
};
Result<TlsFiles> MakeSelfSignedCert(const std::string& dir);

// Percent-encodes an object key for a path-style URL: everything but A-Z a-z 0-9 - _ . ~ and '/'.
std::string PercentEncodeKey(const std::string& key);

// What every test server offers. Subclasses start the processes in their static Start().
class S3Server {
 public:
  virtual ~S3Server() = default;
  S3Server(const S3Server&) = delete;
  S3Server& operator=(const S3Server&) = delete;

  const std::string& endpoint() const { return endpoint_; }  // "http://127.0.0.1:PORT" or https
  const std::string& access_key() const { return access_key_; }
  const std::string& secret_key() const { return secret_key_; }
  const std::string& region() const { return region_; }
  const std::string& ca_file() const { return ca_file_; }  // empty unless HTTPS
  // Where the server keeps data, configs and logs; tests may put scratch files here too.
  const std::string& dir() const { return dir_.path(); }
  // Time from launch until the server answered S3 requests.
  std::chrono::milliseconds startup_time() const { return startup_time_; }

  // Path-style URLs: ENDPOINT/bucket and ENDPOINT/bucket/percent-encoded-key.
  std::string BucketUrl(const std::string& bucket) const;
  std::string ObjectUrl(const std::string& bucket, const std::string& key) const;

  // A curl argv prefix that signs its request with SigV4 for this server (silent, no proxy,
  // --cacert when HTTPS); append -X, -H, -o, the URL... Runs with RunCommand.
  std::vector<std::string> SignedCurl() const { return SignedCurl(access_key_, secret_key_); }
  std::vector<std::string> SignedCurl(const std::string& access_key,
                                      const std::string& secret_key) const;

  // PUT /bucket; fails unless the server answers 200.
  Status CreateBucket(const std::string& bucket) const;
  // Uploads all objects with 16 parallel curl transfers (1,500 small objects: ~5 s on s3rver,
  // ~12 s on Swift on a busy 2-core machine).
  // Fails unless every upload answered HTTP 200.
  Status PutObjects(const std::string& bucket,
                    const std::vector<std::pair<std::string, std::string>>& key_and_content) const;

 protected:
  S3Server(std::string access_key, std::string secret_key, const std::string& dir_prefix);

  // Starts the server's processes on fresh ports and waits until it serves.
  virtual Status Launch() = 0;
  // Launches servers made by `make` until one serves; another try only when a process exited
  // during start-up (a port taken between FreeLoopbackPort and bind).
  static Result<std::unique_ptr<S3Server>> StartWithRetries(
      const std::function<std::unique_ptr<S3Server>()>& make);

  // Waits until every port accepts connections and a signed GET / (ListBuckets) answers 200.
  // Fails early with kUnavailable when one of `processes` exits (e.g. its port was taken).
  Status WaitUntilServing(const std::vector<ChildProcess*>& processes,
                          const std::vector<int>& ports, std::chrono::seconds timeout) const;

  std::string endpoint_;  // set by the subclass before the server is used
  std::string ca_file_;
  std::chrono::milliseconds startup_time_{0};

 private:
  std::string NetrcFile(const std::string& access_key, const std::string& secret_key) const;

  TempDir dir_;
  std::string access_key_;
  std::string secret_key_;
  std::string region_ = "us-east-1";
};

// npm s3rver (node_modules/s3rver of the source tree). Credentials S3RVER/S3RVER; it does not
// verify signatures and has known bugs (suffix ranges, listing prefixes, plain multipart ETags).
class S3rver final : public S3Server {
 public:
  struct Options {
    std::vector<std::string> buckets = {};  // created at start-up
    std::string tls_key_path = {};          // both set: serve HTTPS (see MakeSelfSignedCert)
    std::string tls_cert_path = {};
  };
  static Result<std::unique_ptr<S3rver>> Start(const Options& options);
  static Result<std::unique_ptr<S3rver>> Start() { return Start(Options{}); }
  const ChildProcess& process() const { return *process_; }

 private:
  explicit S3rver(Options options)
      : S3Server("S3RVER", "S3RVER", "lakecache-s3rver"), options_(std::move(options)) {}
  Status Launch() override;

  Options options_;
  std::unique_ptr<ChildProcess> process_;
};

// OpenStack Swift with the s3api middleware: proxy, account, container and object servers, one
// device, one replica. Credentials test:tester / testing; verifies SigV4 like AWS.
class SwiftS3 final : public S3Server {
 public:
  struct Options {
    std::vector<std::string> buckets = {};  // created at start-up
  };
  static Result<std::unique_ptr<SwiftS3>> Start(const Options& options);
  static Result<std::unique_ptr<SwiftS3>> Start() { return Start(Options{}); }

 private:
  // The secret is one no log or output may show: the suite scans for its prefix (see
  // scripts/scan-secrets.sh).
  SwiftS3() : S3Server("test:tester", kSwiftSecret, "lakecache-swift") {}
  static constexpr char kSwiftSecret[] = "lcsecret-swift-5f0c2a";
  Status Launch() override;
  Status WriteConfigs(const std::vector<int>& ports) const;  // proxy, account, container, object

  std::unique_ptr<ChildProcess> process_;  // run_swift.py, which forks the four servers
};

// Starts an S3rver ("s3rver") or a SwiftS3 ("swift") with `buckets`, for tests that run the same
// cases against both.
Result<std::unique_ptr<S3Server>> StartS3Server(const std::string& kind,
                                                const std::vector<std::string>& buckets = {});
// The one server of `kind` of this test program, started with `buckets` on first use (a server
// that does not start ends the program, saying why).
S3Server& SharedS3Server(const std::string& kind, const std::vector<std::string>& buckets);

}  // namespace lakecache::testing
