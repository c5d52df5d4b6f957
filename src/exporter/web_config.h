// `agent --web-config-file`: TLS and basic authentication for /metrics and /healthz in the
// format of Prometheus' exporter-toolkit (node_exporter's and dcgm-exporter's --web.config.file,
// its docs/web-configuration.md), so that one file and one Prometheus scrape config serve them all.
// Parsing is pure (tests/fuzz/web_config.cc); the files it names are read by web_security.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"

namespace polyaccel::exporter {

// Go's crypto/tls ClientAuthType, by the names exporter-toolkit takes.
enum class ClientAuth {
  no_client_cert,                  // NoClientCert: none asked for
  request_client_cert,             // RequestClientCert: asked for, not verified, not required
  require_any_client_cert,         // RequireAnyClientCert: required, not verified
  verify_client_cert_if_given,     // VerifyClientCertIfGiven: verified when sent
  require_and_verify_client_cert,  // RequireAndVerifyClientCert: required and verified
};

enum class TlsVersion { tls10, tls11, tls12, tls13 };

struct TlsServerConfig {
  // Either the file (a path relative to the web config file's directory, as exporter-toolkit)
  // or the PEM inline; exactly one of cert/cert_file and of key/key_file.
  std::string cert_file, key_file, client_ca_file;
  std::string cert, key, client_ca;
  ClientAuth client_auth = ClientAuth::no_client_cert;
  std::vector<std::string> client_allowed_sans;  // exact DNS, IP, e-mail or URI SANs
  TlsVersion min_version = TlsVersion::tls12;
  TlsVersion max_version = TlsVersion::tls13;
  // OpenSSL's names of Go's cipher_suites (TLS 1.2 and below; TLS 1.3's are fixed, as in Go).
  std::vector<std::string> cipher_suites;
  bool prefer_server_cipher_suites = true;
  std::vector<std::string> curve_preferences;  // OpenSSL's group names: P-256, X25519
};

struct WebConfig {
  bool tls = false;  // tls_server_config set: HTTPS only
  TlsServerConfig tls_server;
  // user → bcrypt hash ($2a$, $2b$, $2y$), checked by crypt_checksalt, cost at most
  // kMaxBcryptCost; empty: no authentication.
  std::vector<std::pair<std::string, std::string>> basic_auth_users;
  // Paths answered without basic auth (exporter-toolkit's auth_excluded_paths): "/healthz" for
  // kubelet's probes, which cannot hold a password.
  std::vector<std::string> auth_excluded_paths;
  // http_server_config.headers: added to every answer.
  std::vector<std::pair<std::string, std::string>> headers;
  // rate_limit: a token bucket of `burst` requests refilled one per `interval`; 0: none.
  std::chrono::milliseconds rate_limit_interval{0};
  std::uint32_t rate_limit_burst = 0;
  // Every file it reads, itself first: a change to any of them reloads it (certificate rotation).
  std::vector<std::string> files;
};

// The file's text; `path` names it in errors ("FILE:LINE: ...") and anchors relative paths.
// Unknown keys are refused with their line; no secret (key, hash) is ever part of an error.
Result<WebConfig> parse_web_config(std::string_view text, const std::string& path);

// The highest bcrypt cost a web config may use: each step doubles a check (cost 10 is ~70 ms
// here, 14 about a second, 31 days), and checks run on the threads that answer requests.
inline constexpr int kMaxBcryptCost = 14;
// The cost of a hash parse_web_config took (its two digits after "$2?$").
int bcrypt_cost(const std::string& hash);
// The hash an unknown user's password is checked against: the costliest known one, so that the
// time a 401 takes does not tell which users exist. `users` is not empty.
const std::string& unknown_user_hash(const std::vector<std::pair<std::string, std::string>>& users);

// Reads `path` (a regular file of at most 1 MiB) and parses it.
Result<WebConfig> read_web_config(const std::string& path);

}  // namespace polyaccel::exporter
