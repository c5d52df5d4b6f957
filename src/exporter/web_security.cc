#include "exporter/web_security.h"

#include <arpa/inet.h>
#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <strings.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/file_io.h"
#include "core/log.h"
#include "core/strings.h"

namespace polyaccel::exporter {
namespace {

constexpr std::uint64_t kMaxPemBytes = std::uint64_t{1} << 20;
constexpr std::size_t kMaxCachedVerdicts = 4096;  // good credentials only

// OpenSSL's reasons for the last failure, oldest first; the queue is emptied.
std::string openssl_reason() {
  std::string out;
  for (unsigned long e; (e = ERR_get_error()) != 0;) {
    const char* reason = ERR_reason_error_string(e);
    if (!reason) continue;
    if (!out.empty()) out += ": ";
    out += reason;
  }
  return out.empty() ? "no reason given" : out;
}

int openssl_version(TlsVersion v) {
  switch (v) {
    case TlsVersion::tls10:
      return TLS1_VERSION;
    case TlsVersion::tls11:
      return TLS1_1_VERSION;
    case TlsVersion::tls12:
      return TLS1_2_VERSION;
    case TlsVersion::tls13:
      return TLS1_3_VERSION;
  }
  return TLS1_2_VERSION;
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

// A handshake of the server context with a client that takes anything, through a memory pair:
// a key the settings cannot use (its type outside every allowed cipher suite, the versions, the
// curves) fails here, at start or reload, instead of at every client's handshake. The client's
// certificate is not asked for: that is the client's part.
Status self_handshake(SSL_CTX* server_ctx, const std::string& input) {
  ERR_clear_error();
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> client_ctx(SSL_CTX_new(TLS_client_method()),
                                                          SSL_CTX_free);
  if (!client_ctx) return Error{ErrorCode::internal, input, "OpenSSL: " + openssl_reason(), {}};
  SSL_CTX_set_security_level(client_ctx.get(), 0);
  SSL_CTX_set_min_proto_version(client_ctx.get(), TLS1_VERSION);
  SSL_CTX_set_cipher_list(client_ctx.get(), "ALL:@SECLEVEL=0");
  SSL_CTX_set_verify(client_ctx.get(), SSL_VERIFY_NONE, nullptr);
  std::unique_ptr<SSL, void (*)(SSL*)> server(SSL_new(server_ctx), SSL_free);
  std::unique_ptr<SSL, void (*)(SSL*)> client(SSL_new(client_ctx.get()), SSL_free);
  BIO* server_end = nullptr;
  BIO* client_end = nullptr;
  if (!server || !client || BIO_new_bio_pair(&server_end, 0, &client_end, 0) != 1)
    return Error{ErrorCode::internal, input, "OpenSSL: " + openssl_reason(), {}};
  SSL_set_bio(server.get(), server_end, server_end);
  SSL_set_bio(client.get(), client_end, client_end);
  SSL_set_verify(server.get(), SSL_VERIFY_NONE, nullptr);
  SSL_set_accept_state(server.get());
  SSL_set_connect_state(client.get());
  bool server_done = false, client_done = false;
  std::string failed;
  for (int round = 0; round < 64 && failed.empty() && !(server_done && client_done); ++round) {
    for (auto [ssl, done] : {std::pair{client.get(), &client_done}, {server.get(), &server_done}}) {
      if (*done || !failed.empty()) continue;
      int r = SSL_do_handshake(ssl);
      if (r == 1) {
        *done = true;
        continue;
      }
      int e = SSL_get_error(ssl, r);
      if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) failed = openssl_reason();
    }
  }
  if (failed.empty() && server_done && client_done) return Ok{};
  return bad_input(input, "a TLS handshake with this certificate, key and settings fails: " +
                              (failed.empty() ? std::string("it does not finish") : failed));
}

// One of cert/cert_file (key/key_file, client_ca/client_ca_file): its PEM text and how to name it.
struct Pem {
  std::string text;
  std::string name;  // "cert_file /etc/x.crt", "the inline key"
};

Result<Pem> pem_of(const std::string& file, const std::string& inline_text, const char* key,
                   const char* file_key, std::string_view kind, const std::string& input) {
  if (file.empty()) return Pem{inline_text, std::string("the inline ") + key};
  auto text = read_input_file(file, kMaxPemBytes, kind);
  if (!text) return bad_input(input, std::string(file_key) + ": " + text.error().message());
  return Pem{std::move(*text), std::string(file_key) + " " + file};
}

// Whether one of the certificate's subject alternative names is exactly one of `allowed`.
bool has_allowed_san(X509* cert, const std::vector<std::string>& allowed) {
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (!names) return false;
  bool found = false;
  for (int i = 0; i < sk_GENERAL_NAME_num(names) && !found; ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    std::string text;
    if (name->type == GEN_DNS || name->type == GEN_EMAIL || name->type == GEN_URI) {
      const ASN1_IA5STRING* s = name->d.ia5;
      text.assign(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                  static_cast<std::size_t>(ASN1_STRING_length(s)));
    } else if (name->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* ip = name->d.ip;
      char buf[INET6_ADDRSTRLEN] = {};
      int len = ASN1_STRING_length(ip);
      int family = len == 4 ? AF_INET : len == 16 ? AF_INET6 : 0;
      if (family && inet_ntop(family, ASN1_STRING_get0_data(ip), buf, sizeof buf)) text = buf;
    }
    if (text.empty()) continue;
    for (const auto& a : allowed) {
      // An IP written another way ("::0001") compares by its bytes' text.
      std::string canonical = a;
      unsigned char bytes[16];
      char buf[INET6_ADDRSTRLEN];
      if (inet_pton(AF_INET6, a.c_str(), bytes) == 1 && inet_ntop(AF_INET6, bytes, buf, sizeof buf))
        canonical = buf;
      if (text == a || text == canonical) found = true;
    }
  }
  GENERAL_NAMES_free(names);
  return found;
}

// exporter-toolkit's client_auth_type in OpenSSL's verify callback: RequestClientCert and
// RequireAnyClientCert take any certificate, the two Verify ones the chain's verdict; then the
// leaf's SANs against client_allowed_sans.
int verify_client(int preverify_ok, X509_STORE_CTX* store) {
  auto* ssl =
      static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  if (!ssl) return 0;
  auto* policy = static_cast<const TlsContext*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)));
  if (!policy) return 0;
  bool verifies = policy->client_auth == ClientAuth::verify_client_cert_if_given ||
                  policy->client_auth == ClientAuth::require_and_verify_client_cert;
  if (verifies && !preverify_ok) return 0;
  if (X509_STORE_CTX_get_error_depth(store) != 0 || policy->client_allowed_sans.empty()) return 1;
  return has_allowed_san(X509_STORE_CTX_get_current_cert(store), policy->client_allowed_sans) ? 1
                                                                                              : 0;
}

std::string file_stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
         std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec) + ":" + std::to_string(st.st_ctim.tv_sec) + "." +
         std::to_string(st.st_ctim.tv_nsec);
}

// RFC 7617: "Basic " and base64 of "user:password". Empty user on anything malformed.
std::pair<std::string, std::string> basic_credentials(std::string_view header) {
  while (!header.empty() && header.front() == ' ')
    header.remove_prefix(1);
  if (header.size() < 6 || strncasecmp(header.data(), "basic ", 6) != 0) return {};
  std::string_view encoded = header.substr(6);
  while (!encoded.empty() && (encoded.front() == ' '))
    encoded.remove_prefix(1);
  while (!encoded.empty() && (encoded.back() == ' ' || encoded.back() == '\r'))
    encoded.remove_suffix(1);
  if (encoded.empty() || encoded.size() % 4 != 0 || encoded.size() > 4096) return {};
  std::string decoded(encoded.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(decoded.data()),
                          reinterpret_cast<const unsigned char*>(encoded.data()),
                          static_cast<int>(encoded.size()));
  if (n < 0) return {};
  std::size_t padding = encoded.back() == '=' ? (encoded[encoded.size() - 2] == '=' ? 2 : 1) : 0;
  decoded.resize(static_cast<std::size_t>(n) - padding);
  auto colon = decoded.find(':');
  if (colon == std::string::npos || colon == 0) return {};
  return {decoded.substr(0, colon), decoded.substr(colon + 1)};
}

// Whether bcrypt of `password` under `hash`'s salt and cost is `hash` (libxcrypt's crypt_r).
bool bcrypt_matches(const std::string& password, const std::string& hash) {
  if (password.find('\0') != std::string::npos) return false;
  auto data = std::make_unique<crypt_data>();  // zeroed, as crypt_r asks on first use
  const char* out = crypt_r(password.c_str(), hash.c_str(), data.get());
  bool match = out && out[0] != '*' && std::strlen(out) == hash.size() &&
               CRYPTO_memcmp(out, hash.data(), hash.size()) == 0;
  OPENSSL_cleanse(data.get(), sizeof(crypt_data));
  return match;
}

std::string sha256(const std::string& text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), digest, &len, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(digest), len);
}

}  // namespace

TlsContext::~TlsContext() {
  if (ctx) SSL_CTX_free(ctx);
}

Result<std::shared_ptr<const TlsContext>> make_tls_context(const TlsServerConfig& config,
                                                           const std::string& web_config_path) {
  const std::string input = "web config " + web_config_path;
  auto result = std::make_shared<TlsContext>();
  ERR_clear_error();
  result->ctx = SSL_CTX_new(TLS_server_method());
  if (!result->ctx) return Error{ErrorCode::internal, input, "OpenSSL: " + openssl_reason(), {}};
  SSL_CTX* ctx = result->ctx;
  result->client_auth = config.client_auth;
  result->client_allowed_sans = config.client_allowed_sans;
  SSL_CTX_set_app_data(ctx, result.get());
  SSL_CTX_set_min_proto_version(ctx, openssl_version(config.min_version));
  SSL_CTX_set_max_proto_version(ctx, openssl_version(config.max_version));
  // The front writes an answer in pieces as the socket takes them.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  if (config.prefer_server_cipher_suites) SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (!config.cipher_suites.empty()) {
    std::string list;
    for (const auto& c : config.cipher_suites)
      list += (list.empty() ? "" : ":") + c;
    if (SSL_CTX_set_cipher_list(ctx, list.c_str()) != 1)
      return bad_input(input, "cipher_suites: OpenSSL takes none of them: " + openssl_reason());
  }
  if (!config.curve_preferences.empty()) {
    std::string list;
    for (const auto& c : config.curve_preferences)
      list += (list.empty() ? "" : ":") + c;
    if (SSL_CTX_set1_groups_list(ctx, list.c_str()) != 1)
      return bad_input(input, "curve_preferences: " + openssl_reason());
  }

  auto cert = pem_of(config.cert_file, config.cert, "cert", "cert_file", "certificate file", input);
  if (!cert) return cert.error();
  {
    BioPtr bio(BIO_new_mem_buf(cert->text.data(), static_cast<int>(cert->text.size())));
    X509* leaf = PEM_read_bio_X509_AUX(bio.get(), nullptr, nullptr, nullptr);
    if (!leaf) return bad_input(input, cert->name + ": no PEM certificate: " + openssl_reason());
    int ok = SSL_CTX_use_certificate(ctx, leaf);
    X509_free(leaf);
    if (ok != 1) return bad_input(input, cert->name + ": " + openssl_reason());
    // The rest of the file is the chain, as Go's LoadX509KeyPair takes it.
    for (X509* ca; (ca = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) != nullptr;) {
      if (SSL_CTX_add0_chain_cert(ctx, ca) != 1) {
        X509_free(ca);
        return bad_input(input, cert->name + ": " + openssl_reason());
      }
    }
    ERR_clear_error();  // the end of the file reads as "no start line"
  }
  auto key = pem_of(config.key_file, config.key, "key", "key_file", "key file", input);
  if (!key) return key.error();
  {
    BioPtr bio(BIO_new_mem_buf(key->text.data(), static_cast<int>(key->text.size())));
    // No passphrase callback: an encrypted key is refused rather than prompting.
    EVP_PKEY* pkey = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, const_cast<char*>(""));
    OPENSSL_cleanse(key->text.data(), key->text.size());
    if (!pkey) return bad_input(input, key->name + ": no PEM private key: " + openssl_reason());
    int ok = SSL_CTX_use_PrivateKey(ctx, pkey);
    EVP_PKEY_free(pkey);
    if (ok != 1 || SSL_CTX_check_private_key(ctx) != 1)
      return bad_input(input,
                       key->name + " does not match " + cert->name + ": " + openssl_reason());
  }
  int mode = SSL_VERIFY_NONE;
  switch (config.client_auth) {
    case ClientAuth::no_client_cert:
      break;
    case ClientAuth::request_client_cert:
    case ClientAuth::verify_client_cert_if_given:
      mode = SSL_VERIFY_PEER;
      break;
    case ClientAuth::require_any_client_cert:
    case ClientAuth::require_and_verify_client_cert:
      mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
      break;
  }
  if (!config.client_ca_file.empty() || !config.client_ca.empty()) {
    auto ca = pem_of(config.client_ca_file, config.client_ca, "client_ca", "client_ca_file",
                     "client CA file", input);
    if (!ca) return ca.error();
    BioPtr bio(BIO_new_mem_buf(ca->text.data(), static_cast<int>(ca->text.size())));
    X509_STORE* store = SSL_CTX_get_cert_store(ctx);
    STACK_OF(X509_NAME)* names = sk_X509_NAME_new_null();
    int count = 0;
    for (X509* c; (c = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) != nullptr;) {
      X509_STORE_add_cert(store, c);
      if (X509_NAME* n = X509_NAME_dup(X509_get_subject_name(c))) sk_X509_NAME_push(names, n);
      X509_free(c);
      ++count;
    }
    ERR_clear_error();
    if (count == 0) {
      sk_X509_NAME_pop_free(names, X509_NAME_free);
      return bad_input(input, ca->name + ": no PEM certificate");
    }
    SSL_CTX_set_client_CA_list(ctx, names);  // takes `names`
  }
  if (mode != SSL_VERIFY_NONE) {
    SSL_CTX_set_verify(ctx, mode, verify_client);
    // Resumed sessions keep their verified client: OpenSSL requires a context id for them.
    static const unsigned char kSessionId[] = "polyaccel-agent";
    SSL_CTX_set_session_id_context(ctx, kSessionId, sizeof kSessionId - 1);
  }
  if (Status st = self_handshake(ctx, input); !st) return st.error();
  return std::shared_ptr<const TlsContext>(std::move(result));
}

Result<std::shared_ptr<const WebSecurity::Loaded>> WebSecurity::read(const std::string& path) {
  auto loaded = std::make_shared<Loaded>();
  // Stamps first: a file changed while it is read is read again at the next check.
  loaded->stamps.push_back({path, file_stamp(path)});
  auto config = read_web_config(path);
  if (!config) return config.error();
  for (std::size_t i = 1; i < config->files.size(); ++i)
    loaded->stamps.push_back({config->files[i], file_stamp(config->files[i])});
  if (config->tls) {
    auto tls = make_tls_context(config->tls_server, path);
    if (!tls) return tls.error();
    loaded->tls = *tls;
  }
  loaded->config = std::move(*config);
  return std::shared_ptr<const Loaded>(std::move(loaded));
}

Result<std::shared_ptr<WebSecurity>> WebSecurity::load(const std::string& path) {
  auto loaded = read(path);
  if (!loaded) return loaded.error();
  auto security = std::shared_ptr<WebSecurity>(new WebSecurity());
  security->path_ = path;
  security->tls_ = (*loaded)->config.tls;
  security->current_ = *loaded;
  security->tokens_ = (*loaded)->config.rate_limit_burst;
  security->refilled_ = std::chrono::steady_clock::now();
  return security;
}

std::shared_ptr<const WebSecurity::Loaded> WebSecurity::current() const {
  std::lock_guard lock(mu_);
  return current_;
}

std::shared_ptr<const TlsContext> WebSecurity::tls_context() const {
  return current()->tls;
}

bool WebSecurity::needs_auth() const {
  return !current()->config.basic_auth_users.empty();
}

bool WebSecurity::excluded_from_auth(std::string_view path) const {
  auto loaded = current();
  const auto& paths = loaded->config.auth_excluded_paths;
  return std::find(paths.begin(), paths.end(), path) != paths.end();
}

std::vector<std::pair<std::string, std::string>> WebSecurity::headers() const {
  return current()->config.headers;
}

WebSecurity::Auth WebSecurity::check_password(const char* authorization,
                                              std::string_view client) const {
  auto loaded = current();
  const auto& users = loaded->config.basic_auth_users;
  if (users.empty()) return Auth::allowed;
  if (!authorization) return Auth::denied;
  // Not a structured binding: clang 14 cannot capture one in the lambda below.
  std::pair<std::string, std::string> credentials = basic_credentials(authorization);
  const std::string& user = credentials.first;
  std::string& password = credentials.second;
  if (user.empty()) return Auth::denied;
  auto found =
      std::find_if(users.begin(), users.end(), [&](const auto& u) { return u.first == user; });
  const std::string& hash = found != users.end() ? found->second : unknown_user_hash(users);
  std::string key = sha256(user + '\0' + password + '\0' + hash);
  const std::string client_key(client);
  {
    std::lock_guard lock(mu_);
    if (good_credentials_.count(key)) {
      OPENSSL_cleanse(password.data(), password.size());
      return Auth::allowed;
    }
    if (password_checks_ >= max_password_checks_ || checks_by_client_[client_key] >= 1) {
      if (checks_by_client_[client_key] == 0) checks_by_client_.erase(client_key);
      OPENSSL_cleanse(password.data(), password.size());
      return Auth::busy;
    }
    ++password_checks_;
    ++checks_by_client_[client_key];
  }
  // The slot is given back however the check ends (bad_alloc included): a lost one would refuse
  // that client for good.
  auto release = [&] {
    std::lock_guard lock(mu_);
    --password_checks_;
    if (--checks_by_client_[client_key] == 0) checks_by_client_.erase(client_key);
  };
  bool ok = false;
  try {
    ok = bcrypt_matches(password, hash) && found != users.end();
  } catch (...) {
    OPENSSL_cleanse(password.data(), password.size());
    release();
    throw;
  }
  OPENSSL_cleanse(password.data(), password.size());
  release();
  std::lock_guard lock(mu_);
  if (ok) {
    if (good_credentials_.size() >= kMaxCachedVerdicts) good_credentials_.clear();
    good_credentials_.insert(key);
  }
  return ok ? Auth::allowed : Auth::denied;
}

bool WebSecurity::take_token() {
  auto loaded = current();
  auto interval = loaded->config.rate_limit_interval;
  if (interval.count() == 0) return true;
  double burst = loaded->config.rate_limit_burst;
  std::lock_guard lock(mu_);
  auto now = std::chrono::steady_clock::now();
  std::chrono::duration<double, std::milli> elapsed = now - refilled_;
  refilled_ = now;
  tokens_ = std::min(burst, tokens_ + elapsed.count() / static_cast<double>(interval.count()));
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

bool WebSecurity::reload_if_changed() {
  auto loaded = current();
  bool changed = std::any_of(loaded->stamps.begin(), loaded->stamps.end(),
                             [](const FileStamp& f) { return file_stamp(f.path) != f.stamp; });
  if (!changed) return false;
  auto fresh = read(path_);
  std::string error;
  if (!fresh) {
    error = fresh.error().message();
  } else if ((*fresh)->config.tls != tls_) {
    error = "web config " + path_ + ": tls_server_config " + (tls_ ? "was removed" : "was added") +
            "; HTTPS is turned on or off only at start (restart the agent)";
  } else if ((*fresh)->config.basic_auth_users.empty() &&
             !loaded->config.basic_auth_users.empty()) {
    // A file truncated by an editor's non-atomic write, or left with comments only, reads as
    // "no authentication": never taken on a reload, where it would open /metrics to anyone.
    error = "web config " + path_ +
            ": basic_auth_users was removed (an empty or half-written file?); authentication is "
            "turned off only at start (restart the agent)";
  }
  if (!error.empty()) {
    std::lock_guard lock(mu_);
    if (error != last_reload_error_) {
      // Only paths and reasons: web_config.cc and make_tls_context never put a secret in one.
      log_line("polyaccel agent: keeping the previous web config: " + error);
      last_reload_error_ = error;
    }
    return false;
  }
  std::lock_guard lock(mu_);
  current_ = *fresh;
  good_credentials_.clear();
  last_reload_error_.clear();
  log_line("polyaccel agent: web config " + path_ + " reloaded");
  return true;
}

}  // namespace polyaccel::exporter
