// The agent's web side as a client meets it: the exporter-toolkit web config (parse errors with
// FILE:LINE, no secret in any of them), TLS with and without client certificates and basic auth
// through curl against certificates openssl makes here, certificate rotation without a new
// listener, IPv6 and dual-stack listening, and the slow-client bounds (a head deadline that a
// trickling client cannot stretch, connections per client address).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "exporter/exporter.h"
#include "exporter/web_config.h"
#include "exporter/web_security.h"
#include "support/test_pki.h"
#include "support/test_support.h"

namespace polyaccel::exporter {
namespace {

using namespace std::chrono_literals;
using polyaccel::testing::run_command;
using polyaccel::testing::TempDir;
using polyaccel::testing::TestPki;
using polyaccel::testing::write_text;
using ::testing::HasSubstr;
using ::testing::Not;

// Hashes from exporter-toolkit's own test data (web/testdata/web_config_users_noTLS.good.yml),
// made by Go's bcrypt ($2y$, cost 10): carol's password is carol123, dave's dave123.
constexpr const char* kCarolHash = "$2y$10$qRTBuFoULoYNA7AQ/F3ck.trZBPyjV64.oA4ZsSBCIWvXuvQlQTuu";
constexpr const char* kDaveHash = "$2y$10$2UXri9cIDdgeKjBo4Rlpx.U3ZLDV8X1IxKmsfOvhcM5oXQt/mLmXq";

std::string users() {
  return std::string("basic_auth_users:\n  carol: ") + kCarolHash + "\n  dave: " + kDaveHash + "\n";
}

// ---- the parser ----

TEST(WebConfig, EveryKeyOfTheFormat) {
  auto c = parse_web_config(
      "tls_server_config:\n"
      "  cert_file: server.crt\n"
      "  key_file: /etc/polyaccel/server.key\n"
      "  client_auth_type: RequireAndVerifyClientCert\n"
      "  client_ca_file: ca.crt\n"
      "  client_allowed_sans: [prometheus, 10.0.0.1]\n"
      "  min_version: TLS13\n"
      "  max_version: TLS13\n"
      "  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA256]\n"
      "  prefer_server_cipher_suites: false\n"
      "  curve_preferences: [X25519, CurveP256]\n"
      "http_server_config:\n"
      "  http2: false\n"
      "  headers:\n"
      "    X-Frame-Options: deny\n"
      "    Strict-Transport-Security: max-age=31536000\n" +
          users() +
          "auth_excluded_paths: [/healthz]\n"
          "rate_limit:\n  interval: 1s\n  burst: 20\n",
      "/etc/polyaccel/web.yml");
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_TRUE(c->tls);
  const TlsServerConfig& t = c->tls_server;
  EXPECT_EQ(t.cert_file, "/etc/polyaccel/server.crt");  // beside the web config, as the toolkit
  EXPECT_EQ(t.key_file, "/etc/polyaccel/server.key");
  EXPECT_EQ(t.client_ca_file, "/etc/polyaccel/ca.crt");
  EXPECT_EQ(t.client_auth, ClientAuth::require_and_verify_client_cert);
  EXPECT_EQ(t.client_allowed_sans, (std::vector<std::string>{"prometheus", "10.0.0.1"}));
  EXPECT_EQ(t.min_version, TlsVersion::tls13);
  EXPECT_EQ(t.cipher_suites, std::vector<std::string>{"ECDHE-RSA-AES128-GCM-SHA256"});
  EXPECT_FALSE(t.prefer_server_cipher_suites);
  EXPECT_EQ(t.curve_preferences, (std::vector<std::string>{"X25519", "P-256"}));
  EXPECT_EQ(c->headers.size(), 2u);
  EXPECT_EQ(c->basic_auth_users.size(), 2u);
  EXPECT_EQ(c->auth_excluded_paths, std::vector<std::string>{"/healthz"});
  EXPECT_EQ(c->rate_limit_interval, 1s);
  EXPECT_EQ(c->rate_limit_burst, 20u);
  EXPECT_EQ(c->files,
            (std::vector<std::string>{"/etc/polyaccel/web.yml", "/etc/polyaccel/server.crt",
                                      "/etc/polyaccel/server.key", "/etc/polyaccel/ca.crt"}));
  // An empty file, or an empty tls_server_config, is clear text without authentication.
  auto empty = parse_web_config("", "w.yml");
  ASSERT_TRUE(empty);
  EXPECT_FALSE(empty->tls);
  auto no_tls = parse_web_config("tls_server_config: {}\n", "w.yml");
  ASSERT_TRUE(no_tls);
  EXPECT_FALSE(no_tls->tls);
}

TEST(WebConfig, RefusedWithFileLineAndReasonNeverTheSecret) {
  struct Case {
    std::string text;
    std::string says;
  };
  const std::string key_pem = "-----BEGIN PRIVATE KEY-----\nTOPSECRETKEYBYTES\n";
  for (const Case& c : {
           Case{"tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth: x\n",
                "w.yml:4: unknown key 'client_auth' in tls_server_config"},
           Case{"basic_auth:\n  x: y\n", "w.yml:1: unknown key 'basic_auth' in the web config"},
           Case{"tls_server_config:\n  cert_file: a\n", "needs exactly one of key_file and key"},
           Case{"tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: Always\n",
                "w.yml:4: client_auth_type 'Always' is unknown"},
           Case{"tls_server_config:\n  cert_file: a\n  key_file: b\n"
                "  client_auth_type: RequireAndVerifyClientCert\n",
                "w.yml:4: this client_auth_type needs client_ca_file"},
           Case{"tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: c\n",
                "client_auth_type asks for no client certificate"},
           Case{"tls_server_config:\n  cert_file: a\n  key_file: b\n"
                "  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: c\n"
                "  client_allowed_sans: [x]\n",
                "w.yml:6: client_allowed_sans needs client_auth_type RequireAnyClientCert"},
           Case{"tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS14\n",
                "w.yml:4: min_version 'TLS14' is unknown"},
           Case{"tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS13\n"
                "  max_version: TLS12\n",
                "min_version is above max_version"},
           Case{"tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [RC4]\n",
                "w.yml:4: cipher suite 'RC4' is unknown"},
           Case{"tls_server_config:\n  cert_file: a\n  key_file: b\n  curve_preferences: [P-256]\n",
                "curve 'P-256' is unknown"},
           Case{"tls_server_config:\n  cert: x\n  cert_file: a\n  key: |\n    " + key_pem,
                "needs exactly one of cert_file and cert"},
           Case{"basic_auth_users:\n  carol: TOPSECRETNOTAHASH\n",
                "w.yml:2: the password of 'carol' is not a bcrypt hash"},
           // a hash of another method: crypt_checksalt would take it, bcrypt is the format's
           Case{"basic_auth_users:\n  carol: $6$TOPSECRET$abc\n", "is not a bcrypt hash"},
           Case{"basic_auth_users:\n  'ca:rol': " + std::string(kCarolHash) + "\n",
                "holds a colon"},
           // issue 40 (2): a cost-31 hash (days a check) refused at load, not at the first request
           Case{"basic_auth_users:\n  carol: " + std::string(kCarolHash).replace(4, 2, "31") + "\n",
                "w.yml:2: the password of 'carol' has bcrypt cost 31, above 14"},
           Case{"basic_auth_users:\n  carol: " + std::string(kCarolHash).replace(4, 2, "15") + "\n",
                "has bcrypt cost 15"},
           Case{"http_server_config:\n  headers:\n    X-Frame-Options: allowall\n",
                "w.yml:3: X-Frame-Options 'allowall' is not allowed"},
           Case{"http_server_config:\n  headers:\n    Set-Cookie: a\n", "unknown key 'Set-Cookie'"},
           Case{"http_server_config:\n  http3: true\n", "unknown key 'http3'"},
           Case{"rate_limit:\n  interval: 1s\n", "needs a burst of at least 1"},
           Case{"auth_excluded_paths: [healthz]\n", "is not a path"},
           Case{"tls_server_config: [a\n", "w.yml:2: is not YAML"},
           Case{"- a\n", "w.yml:1: must be a mapping"},
       }) {
    auto r = parse_web_config(c.text, "w.yml");
    ASSERT_FALSE(r) << c.text;
    EXPECT_EQ(r.error().code, ErrorCode::bad_input);
    EXPECT_THAT(r.error().message(), HasSubstr(c.says)) << c.text;
    EXPECT_THAT(r.error().message(), Not(HasSubstr("TOPSECRET"))) << c.text;
  }
}

// ---- over HTTP ----

std::shared_ptr<Scraper> scraper_for(const std::string& listen, const std::string& web_config,
                                     std::chrono::milliseconds request_timeout = 3s) {
  ExporterOptions o;
  o.listen = listen;
  o.web_config_file = web_config;
  o.request_timeout = request_timeout;
  o.version = "test";
  return std::make_shared<Scraper>(make_all_collectors(), o, Sources{});
}

// curl's output and, last, the HTTP status (000 when no answer came: a refused handshake).
std::string curl(const std::string& args) {
  return run_command("curl -sS --max-time 20 -w ' %{http_code}' " + args + " 2>/dev/null").output;
}

// issue 40 (8): an unknown user's password is checked against the costliest hash, whatever the
// users' order: a 401 for an unknown user takes as long as one for the slowest known user.
TEST(WebConfig, UnknownUsersAreCheckedAgainstTheCostliestHash) {
  const std::string cheap = std::string(kCarolHash).replace(4, 2, "04");
  const std::string dear = std::string(kDaveHash).replace(4, 2, "12");
  auto c = parse_web_config("basic_auth_users:\n  carol: " + cheap + "\n  dave: " + dear +
                                "\n  erin: " + std::string(kCarolHash) + "\n",
                            "w.yml");
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(bcrypt_cost(cheap), 4);
  EXPECT_EQ(unknown_user_hash(c->basic_auth_users), dear);
}

TEST(WebTls, ClientCertificatesAndBasicAuthAsCurlMeetsThem) {
  TempDir tmp;
  TestPki pki(tmp.path());
  std::string config = (tmp.path() / "web.yml").string();
  write_text(config,
             "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
             "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n"
             "  client_allowed_sans: [prometheus]\n"
             "http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n" +
                 users() + "auth_excluded_paths: [/healthz]\n");
  auto http = HttpExporter::start(scraper_for("127.0.0.1:0", config));
  ASSERT_TRUE(http) << http.error().message();
  const std::string base = "https://127.0.0.1:" + std::to_string((*http)->port());
  const std::string trust = "--cacert '" + pki.ca_crt + "' ";
  const std::string client =
      trust + "--cert '" + pki.client_crt + "' --key '" + pki.client_key + "' ";
  // With the CA's client certificate and a user's password: the scrape.
  std::string ok = curl(client + "-u carol:carol123 " + base + "/metrics");
  EXPECT_THAT(ok, HasSubstr("polyaccel_build_info{"));
  EXPECT_THAT(ok, HasSubstr(" 200"));
  EXPECT_THAT(curl(client + "-u dave:dave123 " + base + "/metrics"), HasSubstr(" 200"));
  // The web config's headers on every answer.
  EXPECT_THAT(curl(client + "-u carol:carol123 -o /dev/null -D - " + base + "/"),
              HasSubstr("X-Content-Type-Options: nosniff"));
  // Certificate but no password, a wrong one, an unknown user: 401 with the Basic challenge.
  std::string none = curl(client + "-D - " + base + "/metrics");
  EXPECT_THAT(none, HasSubstr("WWW-Authenticate: Basic"));
  EXPECT_THAT(none, HasSubstr(" 401"));
  EXPECT_THAT(none, Not(HasSubstr("polyaccel_build_info")));
  EXPECT_THAT(curl(client + "-u carol:dave123 " + base + "/metrics"), HasSubstr(" 401"));
  EXPECT_THAT(curl(client + "-u mallory:carol123 " + base + "/metrics"), HasSubstr(" 401"));
  EXPECT_THAT(curl(client + "-u carol:carol123 " + base + "/nothing"), HasSubstr(" 404"));
  // auth_excluded_paths: /healthz for kubelet's probe, still behind TLS and the client certificate.
  EXPECT_THAT(curl(client + base + "/healthz"),
              HasSubstr("ok: opening the vendor libraries\n 200"));
  // No client certificate, or one no trusted CA signed: no handshake, no answer.
  EXPECT_THAT(curl(trust + "-u carol:carol123 " + base + "/metrics"), HasSubstr("000"));
  EXPECT_THAT(curl(trust + "--cert '" + pki.rogue_crt + "' --key '" + pki.rogue_key +
                   "' -u carol:carol123 " + base + "/metrics"),
              HasSubstr("000"));
  // Clear HTTP to the TLS port gets nothing either.
  EXPECT_EQ(
      curl("-u carol:carol123 http://127.0.0.1:" + std::to_string((*http)->port()) + "/metrics"),
      " 000");
  // A client certificate of the CA whose SAN is not in client_allowed_sans.
  pki.issue("other", "grafana", "subjectAltName=DNS:grafana");
  EXPECT_THAT(curl(trust + "--cert '" + pki.file("other.crt") + "' --key '" +
                   pki.file("other.key") + "' -u carol:carol123 " + base + "/metrics"),
              HasSubstr("000"));
  // TLS 1.2, the default min_version, is taken as well as 1.3.
  EXPECT_THAT(curl(client + "--tls-max 1.2 -u carol:carol123 " + base + "/healthz"),
              HasSubstr(" 200"));
}

TEST(WebTls, RotatedCertificateIsServedWithoutANewListener) {
  TempDir tmp;
  TestPki pki(tmp.path());
  std::string config = (tmp.path() / "web.yml").string();
  write_text(config, "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n");
  auto http = HttpExporter::start(scraper_for("127.0.0.1:0", config));
  ASSERT_TRUE(http) << http.error().message();
  const int port = (*http)->port();
  const std::string base = "https://127.0.0.1:" + std::to_string(port);
  auto subject = [&] {
    return run_command("curl -sS -v --max-time 20 --cacert '" + pki.ca_crt + "' " + base +
                       "/healthz 2>&1 | grep -o 'subject: CN=[a-z0-9-]*'")
        .output;
  };
  EXPECT_EQ(subject(), "subject: CN=agent-1\n");
  // A broken certificate written over the old one: logged, the old context kept.
  write_text(pki.server_crt, "not a certificate\n");
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(subject(), "subject: CN=agent-1\n");
  // cert-manager renews: a new key and certificate, as a Secret update swaps them.
  pki.issue("renewed", "agent-1-renewed", "subjectAltName=IP:127.0.0.1");
  std::filesystem::rename(pki.file("renewed.key"), pki.server_key);
  std::filesystem::rename(pki.file("renewed.crt"), pki.server_crt);
  std::string seen;
  for (int i = 0; i < 100 && seen != "subject: CN=agent-1-renewed\n"; ++i) {
    std::this_thread::sleep_for(100ms);
    seen = subject();
  }
  EXPECT_EQ(seen, "subject: CN=agent-1-renewed\n");
  EXPECT_EQ((*http)->port(), port);
}

// Auth never fails open on a reload: a web config truncated to nothing (an editor's non-atomic
// write) or left with comments only keeps the users it had, and says so; a new set of users is
// taken.
TEST(WebAuth, AReloadThatWouldDropAuthenticationIsRefused) {
  TempDir tmp;
  std::string config = (tmp.path() / "web.yml").string();
  write_text(config, users());
  auto http = HttpExporter::start(scraper_for("127.0.0.1:0", config));
  ASSERT_TRUE(http) << http.error().message();
  const std::string url = "http://127.0.0.1:" + std::to_string((*http)->port()) + "/metrics";
  EXPECT_THAT(curl(url), HasSubstr(" 401"));
  for (const char* text : {"", "# being edited\n"}) {
    write_text(config, text);
    std::this_thread::sleep_for(1500ms);  // past the reload check
    EXPECT_THAT(curl(url), HasSubstr(" 401")) << "'" << text << "' must not open /metrics";
    EXPECT_THAT(curl("-u carol:carol123 " + url), HasSubstr(" 200"));
  }
  // A real change of users is taken: dave alone.
  write_text(config, std::string("basic_auth_users:\n  dave: ") + kDaveHash + "\n");
  std::string seen;
  for (int i = 0; i < 50 && seen.find(" 401") == std::string::npos; ++i) {
    std::this_thread::sleep_for(100ms);
    seen = curl("-u carol:carol123 " + url);
  }
  EXPECT_THAT(curl("-u dave:dave123 " + url), HasSubstr(" 200"));
  EXPECT_THAT(curl("-u carol:carol123 " + url), HasSubstr(" 401"));
}

TEST(WebTls, BadFilesAreRefusedAtStartNamingTheFileAndReason) {
  TempDir tmp;
  TestPki pki(tmp.path());
  struct Case {
    std::string config;
    std::string says;
  };
  const std::string dir = tmp.path().string();
  for (const Case& c : {
           Case{"tls_server_config:\n  cert_file: missing.crt\n  key_file: server.key\n",
                dir + "/missing.crt"},
           // the key as the certificate and the other way round: no PEM certificate in a key
           Case{"tls_server_config:\n  cert_file: server.key\n  key_file: server.crt\n",
                "cert_file " + dir + "/server.key: no PEM certificate"},
           // a key that is not the certificate's
           Case{"tls_server_config:\n  cert_file: server.crt\n  key_file: client.key\n",
                "key_file " + dir + "/client.key does not match cert_file " + dir + "/server.crt"},
           Case{"tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: server.key\n",
                "client_ca_file " + dir + "/server.key: no PEM certificate"},
           Case{"tls_server_config:\n  cert_file: server.crt\n  key_file: /dev/null\n",
                "key_file: /dev/null: is a character device"},
           // Issue 40: a key no handshake can use. The test PKI's keys are ECDSA (P-256); TLS 1.2
           // with RSA suites only leaves nothing to sign with.
           Case{"tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                "  max_version: TLS12\n"
                "  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n",
                "a TLS handshake with this certificate, key and settings fails: no shared cipher"},
       }) {
    std::string config = (tmp.path() / "web.yml").string();
    write_text(config, c.config);
    auto r = run_command(polyaccel::testing::polyaccel_binary() + " agent --topology " +
                         polyaccel::testing::topology_fixture(
                             "2socket-snc4-8numa-4xH100-4xmlx5-pcieswitch_dell-xe8640.xml")
                             .string() +
                         " --kubelet-dir '' --pod-resources-socket '' --nfd-features-dir '' "
                         "--state '' --audit-interval off --listen 127.0.0.1:0 "
                         "--web-config-file '" +
                         config + "' 2>&1");
    EXPECT_EQ(r.exit_code, 2) << c.config << r.output;
    EXPECT_THAT(r.output, HasSubstr("web config " + config)) << c.config;
    EXPECT_THAT(r.output, HasSubstr(c.says)) << c.config;
    EXPECT_THAT(r.output, Not(HasSubstr("PRIVATE KEY"))) << r.output;
  }
  // web_config_file: in the host's config file is --web-config-file.
  std::string config = (tmp.path() / "web.yml").string();
  write_text(config, "basic_auth_users:\n  carol: not-a-hash\n");
  std::string host_config = (tmp.path() / "config.yaml").string();
  write_text(host_config, "web_config_file: " + config + "\n");
  auto r = run_command(polyaccel::testing::polyaccel_binary() + " agent --config '" + host_config +
                       "' --topology " +
                       polyaccel::testing::topology_fixture(
                           "2socket-snc4-8numa-4xH100-4xmlx5-pcieswitch_dell-xe8640.xml")
                           .string() +
                       " --kubelet-dir '' --pod-resources-socket '' --nfd-features-dir '' "
                       "--state '' --audit-interval off --listen 127.0.0.1:0 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr(config + ":2: the password of 'carol' is not a bcrypt hash"));
  EXPECT_THAT(r.output, Not(HasSubstr("not-a-hash")));
  // issue 40 (4): a private key pasted as key_file's value is not echoed at start (nor reload).
  const std::string key_line = "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg";
  write_text(config,
             "tls_server_config:\n  cert_file: c.crt\n  key_file: |\n"
             "    -----BEGIN PRIVATE KEY-----\n    " +
                 key_line + "\n    -----END PRIVATE KEY-----\n");
  auto pasted = WebSecurity::load(config);
  ASSERT_FALSE(pasted);
  EXPECT_THAT(pasted.error().message(), Not(HasSubstr(key_line)));
  EXPECT_THAT(pasted.error().message(), Not(HasSubstr("BEGIN PRIVATE")));
  // The file itself: missing, or a YAML error with its line.
  auto missing = WebSecurity::load(dir + "/nope.yml");
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error().message(), HasSubstr(dir + "/nope.yml"));
}

// ---- IPv6 and dual-stack ----

// Whether this host has ::1 (a container runtime may turn IPv6 off: disable_ipv6=1).
bool has_ipv6_loopback() {
  int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in6 sa{};
  sa.sin6_family = AF_INET6;
  sa.sin6_addr = in6addr_loopback;
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  ::close(fd);
  return ok;
}

TEST(WebListen, Ipv6Ipv4AndDualStack) {
  if (!has_ipv6_loopback()) GTEST_SKIP() << "this host has no ::1 (IPv6 turned off)";
  auto status = [](const std::string& url) {
    return curl("-g -o /dev/null " + url);  // -g: [::1] is not a glob
  };
  {
    auto http = HttpExporter::start(scraper_for("[::1]:0", ""));
    ASSERT_TRUE(http) << http.error().message();
    std::string port = std::to_string((*http)->port());
    EXPECT_EQ(status("http://[::1]:" + port + "/healthz"), " 200");
    EXPECT_EQ(status("http://127.0.0.1:" + port + "/healthz"), " 000");
  }
  {
    // :PORT is every address of both families, as node_exporter's :9100.
    auto http = HttpExporter::start(scraper_for(":0", ""));
    ASSERT_TRUE(http) << http.error().message();
    std::string port = std::to_string((*http)->port());
    EXPECT_EQ(status("http://[::1]:" + port + "/healthz"), " 200");
    EXPECT_EQ(status("http://127.0.0.1:" + port + "/healthz"), " 200");
  }
  for (const char* listen : {"[::]:0", "0.0.0.0:0", "127.0.0.1:0"}) {
    auto http = HttpExporter::start(scraper_for(listen, ""));
    ASSERT_TRUE(http) << listen << ": " << http.error().message();
    std::string port = std::to_string((*http)->port());
    EXPECT_EQ(status("http://127.0.0.1:" + port + "/healthz"), " 200") << listen;
    bool v6 = std::string(listen) == "[::]:0";
    EXPECT_EQ(status("http://[::1]:" + port + "/healthz"), v6 ? " 200" : " 000") << listen;
  }
}

TEST(WebTls, OverIpv6) {
  if (!has_ipv6_loopback()) GTEST_SKIP() << "this host has no ::1 (IPv6 turned off)";
  TempDir tmp;
  TestPki pki(tmp.path());
  std::string config = (tmp.path() / "web.yml").string();
  write_text(config,
             "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n" + users());
  auto http = HttpExporter::start(scraper_for("[::1]:0", config));
  ASSERT_TRUE(http) << http.error().message();
  EXPECT_THAT(curl("-g --cacert '" + pki.ca_crt + "' -u carol:carol123 https://[::1]:" +
                   std::to_string((*http)->port()) + "/metrics"),
              HasSubstr("polyaccel_build_info"));
}

// ---- slow clients ----

int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Whether the server closed the connection (EOF or reset), without waiting.
bool closed_by_server(int fd) {
  char c;
  ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

// A client that sends a header line every 100 ms never completes its head: the deadline runs
// from the connection, not from its last byte, so it is closed once the deadline passes.
TEST(WebSlowClients, TricklingClientIsClosedAtTheHeadDeadline) {
  auto http = HttpExporter::start(scraper_for("127.0.0.1:0", "", 500ms));
  ASSERT_TRUE(http) << http.error().message();
  int fd = connect_to((*http)->port());
  ASSERT_GE(fd, 0);
  std::string line = "GET /metrics HTTP/1.1\r\n";
  ASSERT_EQ(::send(fd, line.data(), line.size(), MSG_NOSIGNAL), static_cast<ssize_t>(line.size()));
  auto start = std::chrono::steady_clock::now();
  bool closed = false;
  int lines = 0;
  // 10 s of trickling at most: far past the 500 ms deadline, so a server that let a trickle
  // stretch it would keep the connection all along.
  while (!closed && std::chrono::steady_clock::now() - start < 10s) {
    std::this_thread::sleep_for(100ms);
    std::string header = "X-Trickle-" + std::to_string(lines++) + ": a\r\n";
    closed = ::send(fd, header.data(), header.size(), MSG_NOSIGNAL) < 0 || closed_by_server(fd);
  }
  EXPECT_TRUE(closed) << "still open after " << lines << " header lines";
  EXPECT_GE(lines, 3);  // not closed at once: the deadline, not the first line, ended it
  ::close(fd);
}

// 100 half-sent requests from one address: the front keeps 64 (max_connections_per_client),
// closes the oldest others, and a scrape from that same address is still answered.
TEST(WebSlowClients, ConnectionsPerClientAreBounded) {
  auto http = HttpExporter::start(scraper_for("127.0.0.1:0", "", 60s));
  ASSERT_TRUE(http) << http.error().message();
  const int port = (*http)->port();
  std::vector<int> clients;
  for (int i = 0; i < 100; ++i) {
    int fd = connect_to(port);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::send(fd, "GET /met", 8, MSG_NOSIGNAL), 8);
    clients.push_back(fd);
    std::this_thread::sleep_for(2ms);  // an order of arrival the front sees
  }
  std::size_t closed = 0;
  for (int i = 0; i < 50 && closed < 36; ++i) {
    std::this_thread::sleep_for(20ms);
    closed = 0;
    for (int fd : clients)
      closed += closed_by_server(fd) ? 1 : 0;
  }
  EXPECT_EQ(closed, 36u);
  // The oldest ones went.
  EXPECT_TRUE(closed_by_server(clients.front()));
  EXPECT_FALSE(closed_by_server(clients.back()));
  EXPECT_THAT(curl("http://127.0.0.1:" + std::to_string(port) + "/healthz"),
              HasSubstr("ok: opening the vendor libraries\n 200"));
  for (int fd : clients)
    ::close(fd);
}

// issue 40 (2): rate_limit never spends /healthz's budget, and an excluded path is answered
// without a password check: a flood of wrong passwords cannot fail kubelet's probe.
TEST(WebAuth, HealthzIsOutsideTheRateLimit) {
  TempDir tmp;
  std::string config = (tmp.path() / "web.yml").string();
  write_text(config, users() +
                         "auth_excluded_paths: [/healthz]\nrate_limit:\n  interval: 1h\n"
                         "  burst: 2\n");
  auto http = HttpExporter::start(scraper_for("127.0.0.1:0", config));
  ASSERT_TRUE(http) << http.error().message();
  const std::string base = "http://127.0.0.1:" + std::to_string((*http)->port());
  for (int i = 0; i < 3; ++i)
    curl(base + "/metrics");
  EXPECT_THAT(curl(base + "/metrics"), HasSubstr(" 429"));  // the bucket is empty
  EXPECT_THAT(curl("-u carol:wrong " + base + "/healthz"), HasSubstr(" 200"));
  EXPECT_THAT(curl(base + "/healthz"), HasSubstr(" 200"));
}

// A cost-12 hash that no password matches: each check runs bcrypt for a while, long enough for
// the checks below to overlap.
std::string slow_users() {
  return users() + "  erin: " + std::string(kCarolHash).replace(4, 2, "12") + "\n";
}

std::string basic(const std::string& user, const std::string& password) {
  std::string plain = user + ":" + password;
  std::string out = "Basic ";
  static constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::size_t i = 0;
  for (; i + 2 < plain.size(); i += 3) {
    unsigned v = (unsigned char)plain[i] << 16 | (unsigned char)plain[i + 1] << 8 |
                 (unsigned char)plain[i + 2];
    out += {kB64[v >> 18], kB64[(v >> 12) & 63], kB64[(v >> 6) & 63], kB64[v & 63]};
  }
  if (i + 1 == plain.size()) {
    unsigned v = (unsigned char)plain[i] << 16;
    out += {kB64[v >> 18], kB64[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == plain.size()) {
    unsigned v = (unsigned char)plain[i] << 16 | (unsigned char)plain[i + 1] << 8;
    out += {kB64[v >> 18], kB64[(v >> 12) & 63], kB64[(v >> 6) & 63], '='};
  }
  return out;
}

// Wrong passwords for erin from `clients` (client i % clients), all started together: what
// each check answered.
std::vector<WebSecurity::Auth> fresh_password_storm(WebSecurity& security, int checks,
                                                    int clients) {
  std::vector<WebSecurity::Auth> results(checks, WebSecurity::Auth::allowed);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < checks; ++i)
    threads.emplace_back([&, i] {
      while (!go)
        std::this_thread::yield();
      results[i] = security.check_password(basic("erin", "guess" + std::to_string(i)).c_str(),
                                           "client" + std::to_string(i % clients));
    });
  go = true;
  for (auto& t : threads)
    t.join();
  return results;
}

// issue 40 (2): password checks are bounded, in all and per client address; past the bound the
// answer is "busy" at once, never a wait behind bcrypt. A good credential is checked once.
TEST(WebAuth, PasswordChecksAreBoundedAndGoodCredentialsRemembered) {
  TempDir tmp;
  std::string config = (tmp.path() / "web.yml").string();
  write_text(config, slow_users());
  auto security = WebSecurity::load(config);
  ASSERT_TRUE(security) << security.error().message();
  WebSecurity& s = **security;
  using Auth = WebSecurity::Auth;
  EXPECT_EQ(s.check_password(basic("carol", "carol123").c_str(), "a"), Auth::allowed);
  EXPECT_EQ(s.check_password(basic("carol", "nope").c_str(), "a"), Auth::denied);
  EXPECT_EQ(s.check_password(nullptr, "a"), Auth::denied);

  s.set_max_password_checks(2);
  auto results = fresh_password_storm(s, 8, 8);  // 8 clients, 2 checks at a time
  EXPECT_GE(std::count(results.begin(), results.end(), Auth::busy), 1);
  EXPECT_GE(std::count(results.begin(), results.end(), Auth::denied), 1);
  EXPECT_EQ(std::count(results.begin(), results.end(), Auth::allowed), 0);

  s.set_max_password_checks(16);
  results = fresh_password_storm(s, 6, 1);  // one client: one check at a time
  EXPECT_GE(std::count(results.begin(), results.end(), Auth::busy), 1);
  EXPECT_GE(std::count(results.begin(), results.end(), Auth::denied), 1);

  // While wrong passwords hold every check, carol's known-good credential is still let in.
  s.set_max_password_checks(1);
  std::thread storm([&] { fresh_password_storm(s, 4, 4); });
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(s.check_password(basic("carol", "carol123").c_str(), "b"), Auth::allowed);
  storm.join();
}

// Through the front: 8 clients at once with wrong passwords from one address get 401s or 503s,
// never all bcrypt at once, and /healthz (excluded) is answered meanwhile.
TEST(WebAuth, FreshPasswordFloodLeavesHealthzAnswered) {
  TempDir tmp;
  std::string config = (tmp.path() / "web.yml").string();
  write_text(config, slow_users() + "auth_excluded_paths: [/healthz]\n");
  auto http = HttpExporter::start(scraper_for("127.0.0.1:0", config));
  ASSERT_TRUE(http) << http.error().message();
  const std::string base = "http://127.0.0.1:" + std::to_string((*http)->port());
  std::vector<std::string> answers(8);
  std::vector<std::thread> flood;
  for (int i = 0; i < 8; ++i)
    flood.emplace_back([&, i] {
      // A header of the client's own cannot pose as another address.
      answers[i] = curl("-H 'X-Polyaccel-Client: c" + std::to_string(i) + "' -u erin:guess" +
                        std::to_string(i) + " " + base + "/metrics");
    });
  std::this_thread::sleep_for(30ms);
  EXPECT_THAT(curl(base + "/healthz"), HasSubstr(" 200"));
  for (auto& t : flood)
    t.join();
  int busy = 0;
  for (const auto& a : answers) {
    EXPECT_THAT(a, ::testing::AnyOf(HasSubstr(" 401"), HasSubstr(" 503")));
    busy += a.find(" 503") != std::string::npos;
  }
  EXPECT_GE(busy, 1);  // one check at a time for one address
}

}  // namespace
}  // namespace polyaccel::exporter
