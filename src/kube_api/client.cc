#include "kube_api/client.h"

#include <curl/curl.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>

#include "core/file_io.h"
#include "core/number.h"
#include "core/secret_text.h"
#include "core/strings.h"
#include "discover/accel/library.h"

namespace polyaccel::kube_api {

namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxResponseBytes = 64u << 20;  // a list of every slice of a big cluster fits
constexpr size_t kMaxCredentialBytes = 1u << 20;

// libcurl, opened when the first client is made (systemd's way with optional libraries): only
// the DRA driver talks to the API server, and libcurl with the TLS, LDAP, SSH and Kerberos
// libraries it pulls in (26 of an agent's 95 shared objects, 3.8 MiB resident) would otherwise
// sit in every polyaccel process. Its header gives the types; nothing links it.
struct Curl {
  SharedLibrary library;  // kept open for the life of the process
  decltype(&curl_global_init) global_init = nullptr;
  decltype(&curl_easy_init) easy_init = nullptr;
  decltype(&curl_easy_cleanup) easy_cleanup = nullptr;
  decltype(&curl_easy_reset) easy_reset = nullptr;
  decltype(&curl_easy_setopt) easy_setopt = nullptr;
  decltype(&curl_easy_perform) easy_perform = nullptr;
  decltype(&curl_easy_getinfo) easy_getinfo = nullptr;
  decltype(&curl_easy_strerror) easy_strerror = nullptr;
  decltype(&curl_slist_append) slist_append = nullptr;
  decltype(&curl_slist_free_all) slist_free_all = nullptr;
};

constexpr const char* kCurlSoname = "libcurl.so.4";

// Loaded once, kept for the life of the process (curl_global_init cannot be undone safely while
// other threads may still use it).
const Result<const Curl*>& curl_library() {
  static const Result<const Curl*> loaded = []() -> Result<const Curl*> {
    auto lib = SharedLibrary::open(kCurlSoname, "libcurl");
    if (!lib) {
      return Error{ErrorCode::not_found, kCurlSoname,
                   "cannot be loaded: " + lib.error().problem + " (the DRA driver's API client)",
                   "install Debian's libcurl4"};
    }
    auto* c = new Curl;  // reachable from `loaded` until exit: never freed, never a leak
    c->library = std::move(*lib);
    SharedLibrary& library = c->library;
    // A library that lacks a function is closed again (delete c) and the driver says so.
    library.resolve(c->global_init, "curl_global_init");
    library.resolve(c->easy_init, "curl_easy_init");
    library.resolve(c->easy_cleanup, "curl_easy_cleanup");
    library.resolve(c->easy_reset, "curl_easy_reset");
    library.resolve(c->easy_setopt, "curl_easy_setopt");
    library.resolve(c->easy_perform, "curl_easy_perform");
    library.resolve(c->easy_getinfo, "curl_easy_getinfo");
    library.resolve(c->easy_strerror, "curl_easy_strerror");
    library.resolve(c->slist_append, "curl_slist_append");
    library.resolve(c->slist_free_all, "curl_slist_free_all");
    if (!library.missing().empty()) {
      std::string names;
      for (const auto& n : library.missing())
        names += (names.empty() ? "" : ", ") + n;
      delete c;
      return Error{ErrorCode::not_found, kCurlSoname, "lacks " + names,
                   "install Debian's libcurl4 (7.85 or later)"};
    }
    c->global_init(CURL_GLOBAL_DEFAULT);
    return c;
  }();
  return loaded;
}

Result<std::string> read_small(const fs::path& p) {
  return read_input_file(p, kMaxCredentialBytes, "credential file");
}

// Why a credential file cannot be used, for an error: its path and the reader's reason ("no such
// file", "is a FIFO, not a regular credential file", "Permission denied"), never its content.
std::string unreadable(const fs::path& p, const Error& e) {
  return shown_or_withheld(p.string()) + " cannot be read: " + e.problem;
}

// A value that goes into an HTTP header or the URL (a token, the server) must hold no control
// character: CR/LF would add a header of the file's choosing to every request and a NUL would cut
// the value short without a word. The value is a secret: the error says where, never what.
std::optional<std::string> control_character(std::string_view value) {
  for (size_t i = 0; i < value.size(); ++i) {
    auto ch = static_cast<unsigned char>(value[i]);
    if (ch < 0x20 || ch == 0x7f) {
      static const char* hex = "0123456789abcdef";
      std::string byte = "0x";
      byte += hex[ch >> 4];
      byte += hex[ch & 15];
      return "holds a control character (byte " + byte + " at offset " + std::to_string(i) +
             "), which would end or add an HTTP header";
    }
  }
  return std::nullopt;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' '))
    s.pop_back();
  return s;
}

// RFC 4648 base64, as kubeconfig's *-data fields hold PEM.
std::optional<std::string> base64_decode(const std::string& in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  unsigned acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=' || c == '\n' || c == '\r' || c == ' ') continue;
    int v = value(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* body = static_cast<std::string*>(user);
  size_t len = size * n;
  if (body->size() + len > kMaxResponseBytes) return 0;  // aborts the transfer
  body->append(data, len);
  return len;
}

// libcurl asks about once a second, and at every transfer step: nonzero ends the request.
int on_progress(void* cancelled, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<const std::atomic<bool>*>(cancelled)->load() ? 1 : 0;
}

// A watch's answer, line by line (one event each).
struct LineSink {
  const Curl* curl = nullptr;
  CURL* handle = nullptr;
  const std::function<bool(const std::string&)>* on_line = nullptr;
  const std::function<bool()>* keep_going = nullptr;
  const std::atomic<bool>* cancelled = nullptr;  // the client's cancel()
  std::string pending;
  std::string* body = nullptr;  // an answer that is not a stream of events (an error Status)
  bool stopped = false;         // on_line or keep_going said stop
};

size_t on_stream(char* data, size_t size, size_t n, void* user) {
  auto* sink = static_cast<LineSink*>(user);
  size_t len = size * n;
  long status = 0;
  sink->curl->easy_getinfo(sink->handle, CURLINFO_RESPONSE_CODE, &status);
  if (status != 200) return on_body(data, size, n, sink->body);
  sink->pending.append(data, len);
  size_t start = 0, nl;
  while ((nl = sink->pending.find('\n', start)) != std::string::npos) {
    std::string line = sink->pending.substr(start, nl - start);
    start = nl + 1;
    if (!line.empty() && !(*sink->on_line)(line)) {
      sink->stopped = true;
      return 0;
    }
  }
  sink->pending.erase(0, start);
  if (sink->pending.size() > kMaxResponseBytes) return 0;
  return len;
}

int on_stream_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* sink = static_cast<LineSink*>(user);
  if (sink->cancelled->load()) return 1;
  if ((*sink->keep_going)()) return 0;
  sink->stopped = true;
  return 1;
}

// A kubeconfig field given as a file (relative to the kubeconfig) or inline as base64.
Result<std::string> file_or_data(const YAML::Node& node, const std::string& file_key,
                                 const std::string& data_key, const fs::path& base,
                                 const std::string& input) {
  if (node[data_key]) {
    auto d = base64_decode(node[data_key].as<std::string>());
    if (!d) return bad_input(input, data_key + " is not base64");
    return *d;
  }
  if (node[file_key]) {
    fs::path p = node[file_key].as<std::string>();
    if (p.is_relative()) p = base / p;
    auto t = read_small(p);
    if (!t) return bad_input(input, file_key + " " + unreadable(p, t.error()));
    return *t;
  }
  return std::string();
}

// A failed transfer for people: what libcurl says (its error buffer names the TLS problem, e.g.
// "unable to get local issuer certificate"), and what to check.
Error transport_error(const Curl& curl, CURLcode rc, const std::string& what, const char* detail) {
  std::string why = *detail ? std::string(detail) : std::string(curl.easy_strerror(rc));
  if (rc == CURLE_PEER_FAILED_VERIFICATION) {
    return Error{ErrorCode::io, what, "the server's TLS certificate could not be verified: " + why,
                 "give the cluster's CA: certificate-authority[-data] in the kubeconfig, ca.crt "
                 "in the pod"};
  }
  if (rc == CURLE_SSL_CERTPROBLEM) {
    return Error{ErrorCode::bad_input, what, "the client certificate cannot be used: " + why,
                 "check client-certificate[-data] and client-key[-data]"};
  }
  if (rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR) {
    return Error{ErrorCode::io, what, "the TLS connection failed: " + why,
                 "does the server want a client certificate the kubeconfig does not give?"};
  }
  return Error{ErrorCode::io, what, why, "is the API server reachable?"};
}

// A cluster's server as client-go reads it: a URL, or a bare host:port taken as https. The
// result has a scheme, a host and no trailing '/', as every request path is appended to it.
Result<std::string> api_server_url(std::string server, const std::string& input) {
  auto refuse = [&](const std::string& why) -> Error {
    return bad_input(input, "cluster server " + why, "give server: https://HOST:PORT");
  };
  if (server.empty()) return refuse("is empty");
  for (unsigned char ch : server) {
    if (ch <= 0x20 || ch >= 0x7f)
      return refuse("has a space, control or non-ASCII character (byte " + std::to_string(ch) +
                    ")");
    if (ch == '?' || ch == '#')
      return refuse("has a query or fragment ('" + std::string(1, static_cast<char>(ch)) + "')");
  }
  auto scheme_end = server.find("://");
  if (scheme_end == std::string::npos) {
    server = "https://" + server;
    scheme_end = 5;
  }
  std::string scheme = server.substr(0, scheme_end);
  for (auto& ch : scheme)
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (scheme != "https" && scheme != "http")
    return refuse("has scheme '" + scheme + "': only https and http are API servers");
  server = scheme + server.substr(scheme_end);
  auto host_begin = scheme_end + 3;
  auto host_end = server.find('/', host_begin);
  std::string host = server.substr(
      host_begin, host_end == std::string::npos ? std::string::npos : host_end - host_begin);
  // Never echo the authority: with user:password@ it holds a secret.
  if (host.find('@') != std::string::npos)
    return refuse(
        "holds credentials (user:password@): they would travel and be logged with "
        "every request URL; give a token or client certificate in the user entry");
  if (host.empty() || host.front() == ':') return refuse("has no host");
  // host, [v6]:port or host:port; the port as the kernel takes it, 1..65535 (not wrapped).
  std::string port;
  if (host.front() == '[') {
    auto close = host.find(']');
    if (close == std::string::npos) return refuse("has an IPv6 address without its closing ']'");
    if (close + 1 < host.size()) {
      if (host[close + 1] != ':') return refuse("has text after its IPv6 address");
      port = host.substr(close + 2);
      if (port.empty()) return refuse("has an empty port after ':'");
    }
  } else if (auto colon = host.find(':'); colon != std::string::npos) {
    if (host.find(':', colon + 1) != std::string::npos)
      return refuse("has an IPv6 address without [brackets] or more than one ':'");
    port = host.substr(colon + 1);
    if (port.empty()) return refuse("has an empty port after ':'");
  }
  if (!port.empty()) {
    auto number = parse_unsigned(port, "port", 1, 65535);
    if (!number) return refuse("has port " + printable(port) + ": not a port in 1..65535");
  }
  while (server.back() == '/')
    server.pop_back();
  return server;
}

}  // namespace

Result<KubeConfig> in_cluster_config(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !*host || !port || !*port) {
    return Error{ErrorCode::not_found, "KUBERNETES_SERVICE_HOST",
                 "is not set: not running in a pod", "give --kubeconfig FILE"};
  }
  std::string h = host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // IPv6
  KubeConfig c;
  auto server = api_server_url("https://" + h + ":" + port,
                               "KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT");
  if (!server) return server.error();
  c.server = *server;
  c.token_file = (fs::path(sa_dir) / "token").string();
  c.credential = "the service account token " + c.token_file;
  auto token = read_small(c.token_file);
  if (!token)
    return Error{
        ErrorCode::not_found, "service account token", unreadable(c.token_file, token.error()), {}};
  c.token = trim(*token);
  if (auto bad = control_character(c.token))
    return bad_input("service account token " + c.token_file, *bad);
  auto ca = read_small(fs::path(sa_dir) / "ca.crt");
  if (!ca)
    return Error{ErrorCode::not_found,
                 "service account CA",
                 unreadable(fs::path(sa_dir) / "ca.crt", ca.error()),
                 {}};
  c.ca_pem = *ca;
  return c;
}

Result<KubeConfig> kubeconfig_file(const std::string& path) {
  auto text = read_small(path);
  if (!text) return bad_input("--kubeconfig " + path, "cannot be read: " + text.error().problem);
  try {
    YAML::Node root = YAML::Load(*text);
    std::string current = root["current-context"] ? root["current-context"].as<std::string>() : "";
    auto named = [&](const char* list, const std::string& name, const char* field) -> YAML::Node {
      if (!root[list] || !root[list].IsSequence()) return YAML::Node();
      for (const auto& e : root[list]) {
        if ((name.empty() || (e["name"] && e["name"].as<std::string>() == name)) && e[field])
          return e[field];
      }
      return YAML::Node();
    };
    YAML::Node ctx = named("contexts", current, "context");
    std::string cluster_name = ctx && ctx["cluster"] ? ctx["cluster"].as<std::string>() : "";
    std::string user_name = ctx && ctx["user"] ? ctx["user"].as<std::string>() : "";
    YAML::Node cluster = named("clusters", cluster_name, "cluster");
    if (!cluster || !cluster["server"])
      return bad_input("--kubeconfig " + path, "has no cluster server for its current context");
    fs::path base = fs::path(path).parent_path();
    KubeConfig c;
    auto server = api_server_url(cluster["server"].as<std::string>(), "--kubeconfig " + path);
    if (!server) return server.error();
    c.server = *server;
    auto ca = file_or_data(cluster, "certificate-authority", "certificate-authority-data", base,
                           "--kubeconfig " + path);
    if (!ca) return ca.error();
    c.ca_pem = *ca;
    c.insecure_skip_tls_verify =
        cluster["insecure-skip-tls-verify"] && cluster["insecure-skip-tls-verify"].as<bool>();
    YAML::Node user = named("users", user_name, "user");
    if (user) {
      if (user["token"]) {
        c.token = user["token"].as<std::string>();
        if (auto bad = control_character(c.token))
          return bad_input("--kubeconfig " + path,
                           "user " + printable(user_name) + ": token " + *bad);
      }
      if (user["tokenFile"]) {
        fs::path token_file = user["tokenFile"].as<std::string>();
        if (token_file.is_relative()) token_file = base / token_file;  // as kubectl resolves it
        c.token_file = token_file.string();
        auto t = read_small(c.token_file);
        if (!t)
          return bad_input("--kubeconfig " + path, "user " + printable(user_name) + ": tokenFile " +
                                                       unreadable(c.token_file, t.error()));
        c.token = trim(*t);
        if (auto bad = control_character(c.token))
          return bad_input("--kubeconfig " + path, "user " + printable(user_name) + ": tokenFile " +
                                                       c.token_file + " " + *bad);
      }

      auto cert = file_or_data(user, "client-certificate", "client-certificate-data", base,
                               "--kubeconfig " + path);
      if (!cert) return cert.error();
      auto key = file_or_data(user, "client-key", "client-key-data", base, "--kubeconfig " + path);
      if (!key) return key.error();
      c.client_cert_pem = *cert;
      c.client_key_pem = *key;
      // What a 401 blames: the credential this kubeconfig presents, not a service account's.
      std::vector<std::string> presented;
      if (!c.client_cert_pem.empty()) presented.push_back("client certificate");
      if (!c.token_file.empty())
        presented.push_back("tokenFile " + c.token_file);
      else if (!c.token.empty())
        presented.push_back("token");
      if (!presented.empty())
        c.credential = "user " + printable(user_name) + "'s " + join(presented, " and ") +
                       " in the kubeconfig " + path;
      if (c.client_cert_pem.empty() != c.client_key_pem.empty())
        return bad_input("--kubeconfig " + path,
                         "gives a client certificate without its key, or a key without its "
                         "certificate");
    }
    // As kubectl: skipping verification while naming a CA is a contradiction, not a choice.
    if (c.insecure_skip_tls_verify && !c.ca_pem.empty())
      return bad_input("--kubeconfig " + path,
                       "gives certificate-authority and insecure-skip-tls-verify together");
    return c;
  } catch (const YAML::Exception& e) {
    return bad_input("--kubeconfig " + path, std::string("is not valid YAML: ") + e.what());
  }
}

std::string now_rfc3339() {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string url_encode(const std::string& text) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

KubeClient::KubeClient(KubeConfig config) : config_(std::move(config)) {
  if (const auto& curl = curl_library()) curl_ = (*curl)->easy_init();
}

KubeClient::~KubeClient() {
  if (curl_) (*curl_library())->easy_cleanup(static_cast<CURL*>(curl_));
}

std::uint64_t KubeClient::writes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return writes_;
}

Result<HttpResponse> KubeClient::request(const std::string& method, const std::string& path,
                                         const std::string& body) {
  return perform(method, path, body, nullptr, config_.timeout);
}

Result<HttpResponse> KubeClient::watch(const std::string& path,
                                       const std::function<bool(const std::string&)>& on_line,
                                       const std::function<bool()>& keep_going,
                                       std::chrono::milliseconds timeout) {
  LineSink sink;
  sink.on_line = &on_line;
  sink.keep_going = &keep_going;
  return perform("GET", path, {}, &sink, timeout);
}

Result<HttpResponse> KubeClient::perform(const std::string& method, const std::string& path,
                                         const std::string& body, void* stream,
                                         std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto& loaded = curl_library();
  if (!loaded) return loaded.error();
  const Curl& curl = **loaded;
  CURL* c = static_cast<CURL*>(curl_);
  if (!c) return Error{ErrorCode::internal, "libcurl", "curl_easy_init failed", {}};
  curl.easy_reset(c);
  std::string url = config_.server + path;
  if (cancelled_)
    return Error{ErrorCode::io, method + " " + url, "cancelled: the agent is stopping", {}};
  HttpResponse r;
  r.credential = config_.credential;
  if (r.credential.empty() && !config_.client_cert_pem.empty())
    r.credential = "the client certificate";
  if (r.credential.empty() && (!config_.token.empty() || !config_.token_file.empty()))
    r.credential = "the bearer token";
  curl.easy_setopt(c, CURLOPT_URL, url.c_str());
  curl.easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
  curl.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl.easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl.easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(config_.timeout.count()));
  curl.easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl.easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  auto* sink = static_cast<LineSink*>(stream);
  if (sink) {
    sink->curl = &curl;
    sink->handle = c;
    sink->body = &r.body;
    sink->cancelled = &cancelled_;
    curl.easy_setopt(c, CURLOPT_WRITEFUNCTION, on_stream);
    curl.easy_setopt(c, CURLOPT_WRITEDATA, sink);
    curl.easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_stream_progress);
    curl.easy_setopt(c, CURLOPT_XFERINFODATA, sink);
  } else {
    curl.easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl.easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
    curl.easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl.easy_setopt(c, CURLOPT_XFERINFODATA, &cancelled_);
  }
  curl_slist* headers = nullptr;
  headers = curl.slist_append(headers, "Accept: application/json");
  std::string token = config_.token;
  if (!config_.token_file.empty()) {
    // Re-read: bound tokens rotate. One that now holds a control character is not sent.
    if (auto t = read_small(config_.token_file)) {
      token = trim(*t);
      if (auto bad = control_character(token)) {
        curl.slist_free_all(headers);
        return bad_input(config_.token_file, "the token file " + *bad);
      }
    }
  }
  std::string auth = "Authorization: Bearer " + token;
  if (!token.empty()) headers = curl.slist_append(headers, auth.c_str());
  if (method == "POST" || method == "PUT" || method == "PATCH") {
    // The API server takes a PATCH only as a named patch type: a JSON merge patch here.
    std::string type =
        "Content-Type: " +
        (method == "PATCH" ? std::string("application/merge-patch+json") : config_.content_type);
    headers = curl.slist_append(headers, type.c_str());
    curl.easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
    curl.easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  }
  curl.easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_blob ca{const_cast<char*>(config_.ca_pem.data()), config_.ca_pem.size(), CURL_BLOB_COPY};
  if (!config_.ca_pem.empty()) {
    // The cluster's CA and only it, as kubectl: libcurl would otherwise also trust the system's
    // bundle, and any public CA could then vouch for the API server.
    curl.easy_setopt(c, CURLOPT_CAINFO_BLOB, &ca);
    curl.easy_setopt(c, CURLOPT_CAINFO, nullptr);
    curl.easy_setopt(c, CURLOPT_CAPATH, nullptr);
  }
  curl_blob cert{const_cast<char*>(config_.client_cert_pem.data()), config_.client_cert_pem.size(),
                 CURL_BLOB_COPY};
  curl_blob key{const_cast<char*>(config_.client_key_pem.data()), config_.client_key_pem.size(),
                CURL_BLOB_COPY};
  if (!config_.client_cert_pem.empty()) {
    curl.easy_setopt(c, CURLOPT_SSLCERT_BLOB, &cert);
    curl.easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
    curl.easy_setopt(c, CURLOPT_SSLKEY_BLOB, &key);
    curl.easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
  }
  if (config_.insecure_skip_tls_verify) {
    curl.easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl.easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  char detail[CURL_ERROR_SIZE] = "";
  curl.easy_setopt(c, CURLOPT_ERRORBUFFER, detail);
  CURLcode rc = curl.easy_perform(c);
  curl.slist_free_all(headers);
  curl.easy_setopt(c, CURLOPT_ERRORBUFFER, nullptr);  // `detail` goes out of scope
  if (rc == CURLE_ABORTED_BY_CALLBACK && cancelled_)
    return Error{ErrorCode::io, method + " " + url, "cancelled: the agent is stopping", {}};
  // A watch ends when we stop it or its time is up: an end, not a failure.
  bool watch_ended =
      sink && (sink->stopped || rc == CURLE_OPERATION_TIMEDOUT) && rc != CURLE_COULDNT_CONNECT;
  if (rc != CURLE_OK && !watch_ended) return transport_error(curl, rc, method + " " + url, detail);
  curl.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  // A dry run (?dryRun=All) changes nothing on the server.
  bool dry_run = path.find("dryRun=All") != std::string::npos;
  if (method != "GET" && !dry_run && r.status >= 200 && r.status < 300) ++writes_;
  return r;
}

}  // namespace polyaccel::kube_api
