#include "exporter/web_config.h"

#include <crypt.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>

#include "core/file_io.h"
#include "core/number.h"
#include "core/secret_text.h"
#include "core/strings.h"

namespace polyaccel::exporter {
namespace {

// A value quoted in an error. Key material or a token pasted into the wrong field (a PEM private
// key where a name or a client_auth_type belongs) is a secret all the same: it is never echoed.
std::string shown(std::string_view value) {
  if (looks_like_secret(value)) return shown_or_withheld(value);
  return quote_input(value);
}

// Go's tls.CipherSuites() names (what exporter-toolkit accepts) and OpenSSL's for the same suite.
// TLS 1.3's suites are accepted and, as in Go, not configurable: they map to "".
struct CipherName {
  const char* go;
  const char* openssl;
};
constexpr CipherName kCiphers[] = {
    {"TLS_AES_128_GCM_SHA256", ""},
    {"TLS_AES_256_GCM_SHA384", ""},
    {"TLS_CHACHA20_POLY1305_SHA256", ""},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA-AES128-SHA"},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA-AES256-SHA"},
    {"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA-AES128-SHA"},
    {"TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA-AES256-SHA"},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256"},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384"},
    {"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256"},
    {"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384"},
    {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"},
    {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305"},
    // Go's older names of the last two
    {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305", "ECDHE-ECDSA-CHACHA20-POLY1305"},
    {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", "ECDHE-RSA-CHACHA20-POLY1305"},
};

// Go's tls.CurveID names and OpenSSL's group names.
struct CurveName {
  const char* go;
  const char* openssl;
};
constexpr CurveName kCurves[] = {
    {"CurveP256", "P-256"}, {"CurveP384", "P-384"}, {"CurveP521", "P-521"}, {"X25519", "X25519"}};

struct ClientAuthName {
  const char* go;
  ClientAuth value;
};
constexpr ClientAuthName kClientAuths[] = {
    {"NoClientCert", ClientAuth::no_client_cert},
    {"RequestClientCert", ClientAuth::request_client_cert},
    {"RequireAnyClientCert", ClientAuth::require_any_client_cert},
    {"VerifyClientCertIfGiven", ClientAuth::verify_client_cert_if_given},
    {"RequireAndVerifyClientCert", ClientAuth::require_and_verify_client_cert},
};

struct VersionName {
  const char* go;
  TlsVersion value;
};
constexpr VersionName kVersions[] = {{"TLS10", TlsVersion::tls10},
                                     {"TLS11", TlsVersion::tls11},
                                     {"TLS12", TlsVersion::tls12},
                                     {"TLS13", TlsVersion::tls13}};

// The headers exporter-toolkit lets a user set, and the values it allows ("" for any).
struct HeaderRule {
  const char* name;
  std::vector<std::string> allowed;
};
const HeaderRule kHeaders[] = {
    {"Content-Security-Policy", {}},         {"X-Frame-Options", {"deny", "sameorigin"}},
    {"X-Content-Type-Options", {"nosniff"}}, {"X-XSS-Protection", {}},
    {"Strict-Transport-Security", {}},
};

template <typename Table>
std::string names_of(const Table& table) {
  std::string out;
  for (const auto& entry : table)
    out += (out.empty() ? "" : ", ") + std::string(entry.go);
  return out;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Reads one YAML document into a WebConfig, naming FILE:LINE for every problem.
class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path) {}

  Error at(const YAML::Mark& mark, const std::string& problem, std::string remedy = {}) const {
    return bad_input(path_ + ":" + std::to_string(mark.line + 1), problem, std::move(remedy));
  }
  Error at(const YAML::Node& node, const std::string& problem, std::string remedy = {}) const {
    return at(node.Mark(), problem, std::move(remedy));
  }

  // A scalar that is not a secret: shown in errors, escaped.
  Result<std::string> string(const YAML::Node& key, const YAML::Node& value) const {
    if (value.IsNull()) return std::string();
    if (!value.IsScalar()) return at(value, key.Scalar() + " must be a string");
    return value.Scalar();
  }
  // A scalar secret (a key, a password hash): never shown.
  Result<std::string> secret(const YAML::Node& key, const YAML::Node& value) const {
    if (value.IsNull()) return std::string();
    if (!value.IsScalar()) return at(value, key.Scalar() + " must be a string");
    return value.Scalar();
  }
  Result<bool> boolean(const YAML::Node& key, const YAML::Node& value) const {
    if (value.IsScalar()) {
      if (value.Scalar() == "true") return true;
      if (value.Scalar() == "false") return false;
    }
    return at(value, key.Scalar() + " must be true or false");
  }
  Result<std::vector<std::string>> list(const YAML::Node& key, const YAML::Node& value) const {
    std::vector<std::string> out;
    if (value.IsNull()) return out;
    if (!value.IsSequence()) return at(value, key.Scalar() + " must be a list");
    for (const auto& item : value) {
      if (!item.IsScalar()) return at(item, key.Scalar() + " must be a list of strings");
      out.push_back(item.Scalar());
    }
    return out;
  }
  // A relative file name is the web config file's neighbour (exporter-toolkit's JoinDir).
  std::string file(const std::string& name) const {
    if (name.empty() || name.front() == '/') return name;
    return (std::filesystem::path(path_).parent_path() / name).string();
  }

  Error unknown(const YAML::Node& key, const std::string& section, const std::string& keys) const {
    return at(key, "unknown key " + shown(key.IsScalar() ? key.Scalar() : "?") + " in " + section,
              "keys: " + keys);
  }

  Status tls(const YAML::Node& node, WebConfig& config) const;
  Status http_server(const YAML::Node& node, WebConfig& config) const;
  Status users(const YAML::Node& node, WebConfig& config) const;
  Status rate_limit(const YAML::Node& node, WebConfig& config) const;

 private:
  std::string path_;
};

Status Reader::tls(const YAML::Node& node, WebConfig& config) const {
  if (node.IsNull()) return Ok{};
  if (!node.IsMap()) return at(node, "tls_server_config must be a mapping");
  TlsServerConfig& t = config.tls_server;
  std::optional<YAML::Mark> auth_at, sans_at;  // where client_auth_type, client_allowed_sans are
  for (auto it = node.begin(); it != node.end(); ++it) {
    // Copies (handles): `it->` is a proxy that lives to the end of the statement only.
    const YAML::Node key = it->first;
    const YAML::Node value = it->second;
    std::string name = key.IsScalar() ? key.Scalar() : "";
    auto take = [&](std::string& into, bool is_secret) -> Status {
      auto v = is_secret ? secret(key, value) : string(key, value);
      if (!v) return v.error();
      into = *v;
      return Ok{};
    };
    Status st = Ok{};
    if (name == "cert_file") {
      st = take(t.cert_file, false);
    } else if (name == "key_file") {
      st = take(t.key_file, false);
    } else if (name == "client_ca_file") {
      st = take(t.client_ca_file, false);
    } else if (name == "cert") {
      st = take(t.cert, false);
    } else if (name == "key") {
      st = take(t.key, true);
    } else if (name == "client_ca") {
      st = take(t.client_ca, false);
    } else if (name == "client_auth_type") {
      auto v = string(key, value);
      if (!v) return v.error();
      auto found = std::find_if(std::begin(kClientAuths), std::end(kClientAuths),
                                [&](const ClientAuthName& n) { return *v == n.go; });
      if (found == std::end(kClientAuths))
        return at(value, "client_auth_type " + shown(*v) + " is unknown",
                  "one of " + names_of(kClientAuths));
      t.client_auth = found->value;
      auth_at = value.Mark();
    } else if (name == "client_allowed_sans") {
      auto v = list(key, value);
      if (!v) return v.error();
      t.client_allowed_sans = *v;
      sans_at = key.Mark();
    } else if (name == "min_version" || name == "max_version") {
      auto v = string(key, value);
      if (!v) return v.error();
      auto found = std::find_if(std::begin(kVersions), std::end(kVersions),
                                [&](const VersionName& n) { return *v == n.go; });
      if (found == std::end(kVersions))
        return at(value, name + " " + shown(*v) + " is unknown", "one of " + names_of(kVersions));
      (name == "min_version" ? t.min_version : t.max_version) = found->value;
    } else if (name == "cipher_suites") {
      auto v = list(key, value);
      if (!v) return v.error();
      for (const auto& suite : *v) {
        auto found = std::find_if(std::begin(kCiphers), std::end(kCiphers),
                                  [&](const CipherName& n) { return suite == n.go; });
        if (found == std::end(kCiphers))
          return at(value, "cipher suite " + shown(suite) + " is unknown",
                    "Go's names: " + names_of(kCiphers));
        if (*found->openssl) t.cipher_suites.push_back(found->openssl);
      }
    } else if (name == "prefer_server_cipher_suites") {
      auto v = boolean(key, value);
      if (!v) return v.error();
      t.prefer_server_cipher_suites = *v;
    } else if (name == "curve_preferences") {
      auto v = list(key, value);
      if (!v) return v.error();
      for (const auto& curve : *v) {
        auto found = std::find_if(std::begin(kCurves), std::end(kCurves),
                                  [&](const CurveName& n) { return curve == n.go; });
        if (found == std::end(kCurves))
          return at(value, "curve " + shown(curve) + " is unknown", "one of " + names_of(kCurves));
        t.curve_preferences.push_back(found->openssl);
      }
    } else {
      return unknown(key, "tls_server_config",
                     "cert_file, key_file, cert, key, client_auth_type, client_ca_file, "
                     "client_ca, client_allowed_sans, min_version, max_version, cipher_suites, "
                     "prefer_server_cipher_suites, curve_preferences");
    }
    if (!st) return st;
  }
  // As exporter-toolkit: a section without certificate, key or client settings means plain HTTP.
  if (t.cert_file.empty() && t.cert.empty() && t.key_file.empty() && t.key.empty() && !auth_at &&
      t.client_ca_file.empty() && t.client_ca.empty())
    return Ok{};
  config.tls = true;
  if (t.cert_file.empty() == t.cert.empty())
    return at(node, "tls_server_config needs exactly one of cert_file and cert");
  if (t.key_file.empty() == t.key.empty())
    return at(node, "tls_server_config needs exactly one of key_file and key");
  if (!t.client_ca_file.empty() && !t.client_ca.empty())
    return at(node, "tls_server_config takes client_ca_file or client_ca, not both");
  if (t.min_version > t.max_version) return at(node, "min_version is above max_version");
  bool has_ca = !t.client_ca_file.empty() || !t.client_ca.empty();
  bool verifies = t.client_auth == ClientAuth::verify_client_cert_if_given ||
                  t.client_auth == ClientAuth::require_and_verify_client_cert;
  if (verifies && !has_ca)
    return at(auth_at ? *auth_at : node.Mark(), "this client_auth_type needs client_ca_file",
              "the CA that signed the clients' certificates");
  if (has_ca && t.client_auth == ClientAuth::no_client_cert)
    return at(node, "client_ca_file is set but client_auth_type asks for no client certificate",
              "client_auth_type: RequireAndVerifyClientCert");
  if (sans_at && !t.client_allowed_sans.empty() &&
      t.client_auth != ClientAuth::require_any_client_cert &&
      t.client_auth != ClientAuth::require_and_verify_client_cert)
    return at(*sans_at,
              "client_allowed_sans needs client_auth_type RequireAnyClientCert or "
              "RequireAndVerifyClientCert (else a client may send no certificate)");
  for (std::string* f : {&t.cert_file, &t.key_file, &t.client_ca_file}) {
    if (f->empty()) continue;
    *f = file(*f);
    config.files.push_back(*f);
  }
  return Ok{};
}

Status Reader::http_server(const YAML::Node& node, WebConfig& config) const {
  if (node.IsNull()) return Ok{};
  if (!node.IsMap()) return at(node, "http_server_config must be a mapping");
  for (auto it = node.begin(); it != node.end(); ++it) {
    std::string name = it->first.IsScalar() ? it->first.Scalar() : "";
    if (name == "http2") {
      // HTTP/2 is not offered (no ALPN): clients speak HTTP/1.1, as they do to node_exporter
      // with http2: false. The key is taken so that one file serves both.
      auto v = boolean(it->first, it->second);
      if (!v) return v.error();
    } else if (name == "headers") {
      const YAML::Node headers = it->second;
      if (headers.IsNull()) continue;
      if (!headers.IsMap()) return at(headers, "headers must be a mapping");
      for (auto h = headers.begin(); h != headers.end(); ++h) {
        std::string header = h->first.IsScalar() ? h->first.Scalar() : "";
        const HeaderRule* rule = nullptr;
        for (const auto& r : kHeaders) {
          if (lower(header) == lower(r.name)) rule = &r;
        }
        if (!rule)
          return unknown(h->first, "headers",
                         "Content-Security-Policy, X-Frame-Options, X-Content-Type-Options, "
                         "X-XSS-Protection, Strict-Transport-Security");
        auto v = string(h->first, h->second);
        if (!v) return v.error();
        if (v->empty()) continue;  // unset if blank
        if (std::any_of(v->begin(), v->end(),
                        [](unsigned char c) { return c < 0x20 || c == 0x7f; }))
          return at(h->second, std::string(rule->name) + " holds a control character");
        if (!rule->allowed.empty() &&
            std::find(rule->allowed.begin(), rule->allowed.end(), lower(*v)) == rule->allowed.end())
          return at(h->second, std::string(rule->name) + " " + shown(*v) + " is not allowed",
                    rule->allowed.size() == 1 ? rule->allowed[0] : "deny or sameorigin");
        config.headers.emplace_back(rule->name, *v);
      }
    } else {
      return unknown(it->first, "http_server_config", "http2, headers");
    }
  }
  return Ok{};
}

// A bcrypt hash as htpasswd -B and Go's bcrypt write it: $2a$, $2b$ or $2y$, a two-digit cost,
// 53 characters of bcrypt's base64; and one libxcrypt takes (crypt_checksalt).
bool is_bcrypt_hash(const std::string& hash) {
  static const std::string kAlphabet =
      "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  if (hash.size() != 60 || hash[0] != '$' || hash[1] != '2' || hash[3] != '$' || hash[6] != '$')
    return false;
  if (hash[2] != 'a' && hash[2] != 'b' && hash[2] != 'y') return false;
  if (!std::isdigit(static_cast<unsigned char>(hash[4])) ||
      !std::isdigit(static_cast<unsigned char>(hash[5])))
    return false;
  int cost = (hash[4] - '0') * 10 + (hash[5] - '0');
  if (cost < 4 || cost > 31) return false;
  if (hash.find_first_not_of(kAlphabet, 7) != std::string::npos) return false;
  int ok = crypt_checksalt(hash.c_str());
  return ok == CRYPT_SALT_OK || ok == CRYPT_SALT_TOO_CHEAP;
}

Status Reader::users(const YAML::Node& node, WebConfig& config) const {
  if (node.IsNull()) return Ok{};
  if (!node.IsMap()) return at(node, "basic_auth_users must be a mapping of user: bcrypt hash");
  std::set<std::string> seen;
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (!it->first.IsScalar() || it->first.Scalar().empty())
      return at(it->first, "a user name must be a non-empty string");
    const std::string user = it->first.Scalar();
    // The name goes into a Basic credential as "user:password": a colon cannot be told apart.
    if (user.find(':') != std::string::npos ||
        std::any_of(user.begin(), user.end(), [](unsigned char c) { return c < 0x20; }))
      return at(it->first, "user " + shown(user) + " holds a colon or control character");
    if (!seen.insert(user).second) return at(it->first, "user " + shown(user) + " twice");
    auto hash = secret(it->first, it->second);
    if (!hash) return hash.error();
    if (!is_bcrypt_hash(*hash))
      return at(it->second, "the password of " + shown(user) + " is not a bcrypt hash",
                "htpasswd -nBC 10 \"\" | tr -d ':\\n' (exporter-toolkit's docs)");
    if (int cost = bcrypt_cost(*hash); cost > kMaxBcryptCost) {
      return at(it->second,
                "the password of " + shown(user) + " has bcrypt cost " + std::to_string(cost) +
                    ", above " + std::to_string(kMaxBcryptCost) +
                    ": each check would hold a thread that answers requests for seconds or more",
                "htpasswd -nBC 10 \"\" | tr -d ':\\n' (exporter-toolkit's docs)");
    }
    config.basic_auth_users.emplace_back(user, *hash);
  }
  return Ok{};
}

Status Reader::rate_limit(const YAML::Node& node, WebConfig& config) const {
  if (node.IsNull()) return Ok{};
  if (!node.IsMap()) return at(node, "rate_limit must be a mapping");
  for (auto it = node.begin(); it != node.end(); ++it) {
    std::string name = it->first.IsScalar() ? it->first.Scalar() : "";
    auto v = string(it->first, it->second);
    if (!v) return v.error();
    if (name == "interval") {
      auto d = parse_duration(*v, "rate_limit interval", std::chrono::milliseconds(0),
                              std::chrono::hours(24));
      if (!d) return at(it->second, d.error().message());
      config.rate_limit_interval = *d;
    } else if (name == "burst") {
      auto n = parse_count(*v);
      if (!n || *n > 1000000)
        return at(it->second, "burst " + shown(*v) + " is not a count (0-1000000)");
      config.rate_limit_burst = *n;
    } else {
      return unknown(it->first, "rate_limit", "interval, burst");
    }
  }
  if (config.rate_limit_interval.count() > 0 && config.rate_limit_burst == 0)
    return at(node, "rate_limit with an interval needs a burst of at least 1",
              "burst: 20 (or interval: 0 for no limit)");
  return Ok{};
}

}  // namespace

Result<WebConfig> parse_web_config(std::string_view text, const std::string& path) {
  Reader reader(path);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return bad_input(path + ":" + std::to_string(e.mark.line + 1), "is not YAML: " + e.msg);
  }
  WebConfig config;
  config.files.push_back(path);
  try {
    if (root.IsNull()) return config;
    if (!root.IsMap())
      return reader.at(root, "must be a mapping",
                       "keys: tls_server_config, http_server_config, basic_auth_users, "
                       "auth_excluded_paths, rate_limit");
    std::set<std::string> seen;
    for (auto it = root.begin(); it != root.end(); ++it) {
      std::string name = it->first.IsScalar() ? it->first.Scalar() : "";
      if (!seen.insert(name).second) return reader.at(it->first, shown(name) + " twice");
      Status st = Ok{};
      if (name == "tls_server_config") {
        st = reader.tls(it->second, config);
      } else if (name == "http_server_config") {
        st = reader.http_server(it->second, config);
      } else if (name == "basic_auth_users") {
        st = reader.users(it->second, config);
      } else if (name == "rate_limit") {
        st = reader.rate_limit(it->second, config);
      } else if (name == "auth_excluded_paths") {
        auto paths = reader.list(it->first, it->second);
        if (!paths) return paths.error();
        for (const auto& p : *paths) {
          if (p.empty() || p.front() != '/')
            return reader.at(it->second, "auth_excluded_paths: " + shown(p) +
                                             " is not a path (it starts with /)");
        }
        config.auth_excluded_paths = *paths;
      } else {
        return reader.unknown(it->first, "the web config",
                              "tls_server_config, http_server_config, basic_auth_users, "
                              "auth_excluded_paths, rate_limit");
      }
      if (!st) return st.error();
    }
  } catch (const YAML::Exception& e) {
    return bad_input(path + ":" + std::to_string(e.mark.line + 1), "is not YAML: " + e.msg);
  }
  return config;
}

Result<WebConfig> read_web_config(const std::string& path) {
  auto text = read_input_file(path, kMaxConfigFileBytes, "web config file");
  if (!text) return text.error();
  return parse_web_config(*text, path);
}

int bcrypt_cost(const std::string& hash) {
  if (hash.size() < 6) return 0;
  return (hash[4] - '0') * 10 + (hash[5] - '0');
}

const std::string& unknown_user_hash(
    const std::vector<std::pair<std::string, std::string>>& users) {
  return std::max_element(users.begin(), users.end(),
                          [](const auto& a, const auto& b) {
                            return bcrypt_cost(a.second) < bcrypt_cost(b.second);
                          })
      ->second;
}

}  // namespace polyaccel::exporter
