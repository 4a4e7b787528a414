// TlsContext: the TLS settings of one side of the bulk data path. TLS 1.3 only. A server
// presents its certificate (a worker's own, security/auth.h); a client checks it against the
// cluster CA and the server's name (the host it dials, or an override), and then proves its role
// with a token (the hello of block_frame.h), not a certificate. The files are watched: a renewed
// certificate or CA is used by new connections (checked at most once a second), so certificates
// rotate without a restart. Thread-safe; shared by every connection of a process.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/result.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace lakecache::rpc {

class TlsContext {
 public:
  enum class Side { kServer, kClient };
  // A server's context from its key and certificate; a client's from the CA it trusts. An error
  // names the file that is missing or unusable (never its contents).
  static Result<std::shared_ptr<const TlsContext>> Server(const std::string& key_path,
                                                          const std::string& cert_path);
  static Result<std::shared_ptr<const TlsContext>> Client(const std::string& ca_path);
  // From a credentials folder: a server's tls.key and tls.crt, a client's ca.crt.
  static Result<std::shared_ptr<const TlsContext>> Load(const std::string& dir, Side side);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  Side side() const { return side_; }
  // A new connection's TLS state, from the files as they are now; null on failure (TlsErrors).
  SSL* NewSsl() const;

 private:
  TlsContext(Side side, std::vector<std::string> files) : side_(side), files_(std::move(files)) {}
  static Result<std::shared_ptr<const TlsContext>> Make(Side side, std::vector<std::string> files);
  Result<SSL_CTX*> Build() const;
  std::string Stamps() const;

  Side side_;
  std::vector<std::string> files_;  // server: key, certificate; client: CA
  mutable Mutex mu_;
  mutable SSL_CTX* ctx_ GUARDED_BY(mu_) = nullptr;
  mutable std::string stamps_ GUARDED_BY(mu_);
  mutable std::chrono::steady_clock::time_point checked_ GUARDED_BY(mu_){};
};

// What tells one version of a file from the next (inode, size, mtime; "" when it is missing): a
// Kubernetes Secret update swaps a symlink, a renewal renames a new file into place.
std::string FileStamp(const std::string& path);

// The last OpenSSL errors of this thread as text ("certificate verify failed"), cleared.
std::string TlsErrors();

}  // namespace lakecache::rpc
