// TlsContext: the TLS settings of one side of the bulk data path, made from a credentials folder
// holding `ca.crt` (the CA that signs every node of the cluster), `tls.crt` and `tls.key` (this
// node's certificate and key: the names of a Kubernetes TLS secret). TLS 1.3 only, and mutual:
// a server asks every client for a certificate signed by the CA, and a client checks the
// server's certificate against the CA and the server's name (the host it dials, or an override).
// Immutable once made; shared by every connection of a process (OpenSSL's SSL_CTX is thread-safe
// for making sessions). Covers the bulk path only: gRPC is still plain text.
#pragma once

#include <memory>
#include <string>

#include "common/result.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace lakecache::rpc {

class TlsContext {
 public:
  enum class Side { kServer, kClient };
  // Loads DIR/ca.crt, DIR/tls.crt and DIR/tls.key; an error names the file that is missing or
  // unusable (never its contents).
  static Result<std::shared_ptr<const TlsContext>> Load(const std::string& dir, Side side);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  Side side() const { return side_; }
  SSL_CTX* get() const { return ctx_; }
  const std::string& dir() const { return dir_; }

 private:
  TlsContext(SSL_CTX* ctx, Side side, std::string dir) : ctx_(ctx), side_(side), dir_(dir) {}
  SSL_CTX* ctx_;
  Side side_;
  std::string dir_;
};

// The last OpenSSL errors of this thread as text ("certificate verify failed"), cleared.
std::string TlsErrors();

}  // namespace lakecache::rpc
