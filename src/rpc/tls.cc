#include "rpc/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <filesystem>

namespace lakecache::rpc {

std::string TlsErrors() {
  std::string out;
  for (unsigned long e = ERR_get_error(); e != 0; e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    const char* reason = ERR_reason_error_string(e);
    if (!out.empty()) out += "; ";
    out += reason != nullptr ? reason : buf;
  }
  return out.empty() ? "unknown TLS error" : out;
}

Result<std::shared_ptr<const TlsContext>> TlsContext::Load(const std::string& dir, Side side) {
  const std::string ca = dir + "/ca.crt", cert = dir + "/tls.crt", key = dir + "/tls.key";
  for (const std::string& file : {ca, cert, key}) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) {
      return Status::InvalidArgument("credentials: " + file +
                                     " is missing (a credentials folder holds ca.crt, tls.crt "
                                     "and tls.key)");
    }
  }
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(side == Side::kServer ? TLS_server_method() : TLS_client_method());
  if (ctx == nullptr) return Status::Internal("cannot make a TLS context: " + TlsErrors());
  std::shared_ptr<const TlsContext> made(new TlsContext(ctx, side, dir));
  auto fail = [](const std::string& what) {
    return Status::InvalidArgument("credentials: " + what + ": " + TlsErrors());
  };
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  if (SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr) != 1)
    return fail("cannot load " + ca);
  if (SSL_CTX_use_certificate_chain_file(ctx, cert.c_str()) != 1) {
    return fail("cannot load " + cert);
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1) {
    return fail("cannot load the key " + key);
  }
  if (SSL_CTX_check_private_key(ctx) != 1) return fail(key + " is not the key of " + cert);
  int verify = SSL_VERIFY_PEER;
  if (side == Side::kServer) {
    verify |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_num_tickets(ctx, 0);
  }
  SSL_CTX_set_verify(ctx, verify, nullptr);
  // A peer that closes without close_notify reads as a plain end of stream, not an error.
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  return made;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

}  // namespace lakecache::rpc
