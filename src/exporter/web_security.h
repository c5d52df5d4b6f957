// The web config (web_config.h) at run time: the OpenSSL server context the front (http_front.h)
// hands each connection, the basic-auth check civetweb's handler makes, the rate limit, and the
// reload when the file or a certificate, key or CA it names changes (certificates rotate: a
// Kubernetes Secret is swapped, cert-manager renews). The listener is never touched by a reload;
// connections already open keep the context they started with.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/error.h"
#include "exporter/web_config.h"

struct ssl_ctx_st;

namespace polyaccel::exporter {

// One OpenSSL server context made from a tls_server_config, with what its verify callback needs.
struct TlsContext {
  ssl_ctx_st* ctx = nullptr;
  ClientAuth client_auth = ClientAuth::no_client_cert;
  std::vector<std::string> client_allowed_sans;
  TlsContext() = default;
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;
  ~TlsContext();
};

// Reads the certificate, key and CA (files or inline PEM) of `config`; an Error names the file
// (or the inline key) and OpenSSL's reason, never a key's bytes.
Result<std::shared_ptr<const TlsContext>> make_tls_context(const TlsServerConfig& config,
                                                           const std::string& web_config_path);

class WebSecurity {
 public:
  // Reads the web config and every file it names: what `agent --web-config-file` refuses at start.
  static Result<std::shared_ptr<WebSecurity>> load(const std::string& path);

  const std::string& path() const { return path_; }
  bool tls() const { return tls_; }  // fixed at start: a reload cannot turn HTTPS on or off
  std::shared_ptr<const TlsContext> tls_context() const;

  // The request's Authorization header (null when none) against basic_auth_users, for the
  // client at `client` (the front's X-Polyaccel-Client; "" when unknown). bcrypt (crypt_r of
  // libxcrypt) costs tens of milliseconds by design and runs on a civetweb worker, so checks are
  // bounded: at most max_password_checks at once and one per client address; past either the
  // answer is `busy` at once (503), so that workers stay free for /healthz, excluded paths and
  // known clients. A good credential is remembered under a SHA-256 of user, password and hash
  // until the next reload: a client with the right password pays bcrypt once. Wrong ones are not
  // remembered (fresh passwords would push the good ones out). An unknown user costs as much as
  // the costliest known one.
  enum class Auth { allowed, denied, busy };
  Auth check_password(const char* authorization, std::string_view client) const;
  // At least 1; the exporter keeps it below its worker count.
  void set_max_password_checks(std::size_t n) { max_password_checks_ = n < 1 ? 1 : n; }
  bool needs_auth() const;
  bool excluded_from_auth(std::string_view path) const;  // auth_excluded_paths
  // rate_limit's token bucket: false when this request is over the limit (answered 429).
  // /healthz never takes a token (exporter.cc): kubelet's probe is not a client to limit.
  bool take_token();
  std::vector<std::pair<std::string, std::string>> headers() const;

  // When a file changed since it was read (size, times or inode: a rename over it or a symlink
  // swap counts), reads them all again. A bad new version is logged once and the old one kept,
  // so that a half-written file never takes the exporter down. True when a new one took effect.
  bool reload_if_changed();

 private:
  struct FileStamp {
    std::string path;
    std::string stamp;  // device, inode, size, mtime and ctime; "" when it cannot be read
  };
  struct Loaded {
    WebConfig config;
    std::shared_ptr<const TlsContext> tls;
    std::vector<FileStamp> stamps;
  };
  static Result<std::shared_ptr<const Loaded>> read(const std::string& path);
  std::shared_ptr<const Loaded> current() const;

  std::string path_;
  bool tls_ = false;
  mutable std::mutex mu_;
  std::shared_ptr<const Loaded> current_;
  std::string last_reload_error_;                             // logged once
  mutable std::unordered_set<std::string> good_credentials_;  // SHA-256s of allowed ones
  std::size_t max_password_checks_ = 2;
  mutable std::size_t password_checks_ = 0;                                // running now
  mutable std::unordered_map<std::string, std::size_t> checks_by_client_;  // running now
  double tokens_ = 0;
  std::chrono::steady_clock::time_point refilled_{};
};

}  // namespace polyaccel::exporter
