#include "rpc/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <sys/stat.h>

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

Result<std::shared_ptr<const TlsContext>> TlsContext::Make(Side side,
                                                           std::vector<std::string> files) {
  std::shared_ptr<TlsContext> made(new TlsContext(side, std::move(files)));
  LC_ASSIGN_OR_RETURN(SSL_CTX * ctx, made->Build());
  MutexLock lock(&made->mu_);
  made->ctx_ = ctx;
  made->stamps_ = made->Stamps();
  made->checked_ = std::chrono::steady_clock::now();
  return std::shared_ptr<const TlsContext>(std::move(made));
}

Result<std::shared_ptr<const TlsContext>> TlsContext::Server(const std::string& key_path,
                                                             const std::string& cert_path) {
  return Make(Side::kServer, {key_path, cert_path});
}

Result<std::shared_ptr<const TlsContext>> TlsContext::Client(const std::string& ca_path) {
  return Make(Side::kClient, {ca_path});
}

Result<std::shared_ptr<const TlsContext>> TlsContext::Load(const std::string& dir, Side side) {
  if (side == Side::kServer) return Server(dir + "/tls.key", dir + "/tls.crt");
  return Client(dir + "/ca.crt");
}

std::string FileStamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
}

std::string TlsContext::Stamps() const {
  std::string out;
  for (const std::string& file : files_) out += FileStamp(file) + ";";
  return out;
}

Result<SSL_CTX*> TlsContext::Build() const {
  for (const std::string& file : files_) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) {
      return Status::InvalidArgument("credentials: " + file + " is missing");
    }
  }
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(side_ == Side::kServer ? TLS_server_method() : TLS_client_method());
  if (ctx == nullptr) return Status::Internal("cannot make a TLS context: " + TlsErrors());
  auto fail = [ctx](const std::string& what) {
    Status s = Status::InvalidArgument("credentials: " + what + ": " + TlsErrors());
    SSL_CTX_free(ctx);
    return s;
  };
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  if (side_ == Side::kServer) {
    const std::string& key = files_[0];
    const std::string& cert = files_[1];
    if (SSL_CTX_use_certificate_chain_file(ctx, cert.c_str()) != 1) {
      return fail("cannot load " + cert);
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1) {
      return fail("cannot load the key " + key);
    }
    if (SSL_CTX_check_private_key(ctx) != 1) return fail(key + " is not the key of " + cert);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  } else {
    const std::string& ca = files_[0];
    if (SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr) != 1) {
      return fail("cannot load " + ca);
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  }
  // A peer that closes without close_notify reads as a plain end of stream, not an error.
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  return ctx;
}

SSL* TlsContext::NewSsl() const {
  MutexLock lock(&mu_);
  auto now = std::chrono::steady_clock::now();
  if (now - checked_ >= std::chrono::seconds(1)) {
    checked_ = now;
    std::string stamps = Stamps();
    if (stamps != stamps_) {
      Result<SSL_CTX*> fresh = Build();
      if (fresh.ok()) {
        SSL_CTX_free(ctx_);  // connections made from it hold their own reference
        ctx_ = *fresh;
        stamps_ = stamps;
      }  // else a file is half-written: keep the last good context, look again in a second
    }
  }
  return SSL_new(ctx_);
}

TlsContext::~TlsContext() {
  MutexLock lock(&mu_);
  SSL_CTX_free(ctx_);
}

}  // namespace lakecache::rpc
