// The Kubernetes API client over real TLS: socat (OpenSSL) terminates TLS in front of the test API
// server (fake_api_server.h serves plain HTTP; Debian's civetweb cannot do TLS with OpenSSL 3).
// A throwaway PKI is made with the openssl CLI into a temporary folder at run time: the cluster
// CA, a server certificate for 127.0.0.1/localhost, one with the wrong name, one from another
// CA, and client certificates from a client CA and from a stranger CA. Checked: the kubeconfig's
// CA forms, refusals of a server that cannot be verified, insecure-skip-tls-verify only when the
// kubeconfig says so, client certificates (files and -data) against a server that demands one,
// and the in-cluster bearer token over TLS.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "dra/fake_api_server.h"
#include "dra/publisher.h"
#include "dra/slices.h"
#include "kube/models.h"

extern char** environ;

namespace polyaccel::dra {
namespace {

namespace fs = std::filesystem;
using polyaccel::testing::FakeApiServer;
using polyaccel::testing::read_text;
using polyaccel::testing::run_command;
using polyaccel::testing::TempDir;
using polyaccel::testing::write_text;

// The throwaway PKI, made once for the whole suite (a few EC keys: fast).
class Pki {
 public:
  Pki() {
    make_ca("ca");        // the cluster's CA
    make_ca("other-ca");  // a CA the client was not told about
    make_ca("client-ca");
    make_ca("stranger-ca");
    make_cert("server", "ca",
              "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
              "extendedKeyUsage=serverAuth\n");
    make_cert("wrong-name", "ca",
              "subjectAltName=DNS:elsewhere.example\n"
              "extendedKeyUsage=serverAuth\n");
    make_cert("other-server", "other-ca",
              "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
              "extendedKeyUsage=serverAuth\n");
    make_cert("client", "client-ca", "extendedKeyUsage=clientAuth\n");
    make_cert("stranger", "stranger-ca", "extendedKeyUsage=clientAuth\n");
  }
  fs::path crt(const std::string& name) const { return dir_.path() / (name + ".crt"); }
  fs::path key(const std::string& name) const { return dir_.path() / (name + ".key"); }
  static std::string base64(const fs::path& p) {
    auto r = run_command("openssl base64 -A -in '" + p.string() + "'");
    if (r.exit_code != 0) throw std::runtime_error("openssl base64 failed");
    return r.output;
  }

 private:
  void run(const std::string& cmd) {
    auto r = run_command(cmd + " 2>&1");
    if (r.exit_code != 0) throw std::runtime_error(cmd + ": " + r.output);
  }
  std::string in_dir(const std::string& file) const {
    return "'" + (dir_.path() / file).string() + "'";
  }
  void make_ca(const std::string& name) {
    run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj "
        "/CN=" +
        name + " -keyout " + in_dir(name + ".key") + " -out " + in_dir(name + ".crt"));
  }
  void make_cert(const std::string& name, const std::string& ca, const std::string& extensions) {
    write_text(dir_.path() / (name + ".ext"), extensions);
    run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=" + name +
        " -keyout " + in_dir(name + ".key") + " -out " + in_dir(name + ".csr"));
    run("openssl x509 -req -days 1 -in " + in_dir(name + ".csr") + " -CA " + in_dir(ca + ".crt") +
        " -CAkey " + in_dir(ca + ".key") + " -set_serial 0x" + std::to_string(1000 + serial_++) +
        " -extfile " + in_dir(name + ".ext") + " -out " + in_dir(name + ".crt"));
  }
  TempDir dir_;
  int serial_ = 0;
};

// socat terminating TLS on a free port of 127.0.0.1 and forwarding to `target_port`. Ready when
// its port accepts; killed (its whole process group: the forked connections too) on destruction.
class TlsFrontend {
 public:
  TlsFrontend(const Pki& pki, const std::string& server_cert, int target_port,
              const std::string& client_ca, const fs::path& log)
      : log_(log) {
    for (int attempt = 0; attempt < 5; ++attempt) {
      port_ = free_port();
      std::string listen = "OPENSSL-LISTEN:" + std::to_string(port_) +
                           ",bind=127.0.0.1,reuseaddr,fork,cert=" + pki.crt(server_cert).string() +
                           ",key=" + pki.key(server_cert).string();
      // With verify=1, Debian's socat 1.7.4 sets no session id context, so OpenSSL 3 refuses a
      // TLS 1.3 client resuming the session of an earlier connection ("session id context
      // uninitialized"); libcurl resumes, as kube-apiserver allows. TLS 1.2 there: a socat limit.
      listen += client_ca.empty() ? std::string(",verify=0")
                                  : ",verify=1,openssl-max-proto-version=TLS1.2,cafile=" +
                                        pki.crt(client_ca).string();
      if (start({"socat", listen, "TCP:127.0.0.1:" + std::to_string(target_port)})) return;
    }
    throw std::runtime_error("socat did not listen: " + read_text(log_));
  }
  ~TlsFrontend() { stop(); }
  TlsFrontend(const TlsFrontend&) = delete;
  TlsFrontend& operator=(const TlsFrontend&) = delete;

  std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }

 private:
  static int free_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("no free port");
    ::close(fd);
    return ntohs(a.sin_port);
  }
  bool accepts() const {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port_));
    bool ok = fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    if (fd >= 0) ::close(fd);
    return ok;
  }
  // True once socat accepts; false when it exited (the port was taken meanwhile: try another).
  bool start(std::vector<std::string> args) {
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, 2, log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    int rc = posix_spawnp(&pid_, "socat", &files, &attr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&files);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) throw std::runtime_error("socat cannot be started (is it installed?)");
    // A deadline for a loaded machine, polled: no fixed sleep.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      int status;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      if (accepts()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    stop();
    throw std::runtime_error("socat did not accept within 20 s");
  }
  void stop() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGTERM);
    int status;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  fs::path log_;
  pid_t pid_ = -1;
  int port_ = 0;
};

class TlsApiServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { pki_ = new Pki(); }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }
  TlsApiServer() : server_(dir_.path()) {
    model_ = polyaccel::testing::load_fixture(polyaccel::testing::kXe8640);
  }
  ~TlsApiServer() override {
    std::lock_guard<std::mutex> lock(server_.mu);
    EXPECT_TRUE(server_.schema_errors.empty()) << server_.schema_errors.front();
  }

  TlsFrontend& frontend(const std::string& server_cert, const std::string& client_ca = {}) {
    tls_ = std::make_unique<TlsFrontend>(*pki_, server_cert, server_.port(), client_ca,
                                         dir_.path() / "socat.log");
    return *tls_;
  }
  // A kubeconfig of one context, `cluster` and `user` being the YAML fields of each.
  fs::path kubeconfig(const std::string& cluster, const std::string& user) {
    fs::path p = dir_.path() / "kubeconfig";
    write_text(p,
               "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
               "clusters:\n- name: c\n  cluster:\n    server: " +
                   tls_->url() + "\n" + cluster +
                   "contexts:\n- name: test\n  context: {cluster: c, user: u}\n"
                   "users:\n- name: u\n  user:\n" +
                   user);
    return p;
  }
  std::unique_ptr<kube_api::KubeClient> client_of(const fs::path& kubeconfig_path) {
    auto c = kube_api::kubeconfig_file(kubeconfig_path.string());
    EXPECT_TRUE(c) << c.error().message();
    if (!c) return nullptr;
    c->timeout = std::chrono::milliseconds(5000);
    return std::make_unique<kube_api::KubeClient>(*c);
  }
  // Publishes the XE8640's pool and reads it back: every slice arrived at the server.
  void expect_publishes(kube_api::KubeClient& client) {
    SliceOptions o;
    o.node = "node-1";
    auto pool = build_pool(model_, o);
    ASSERT_TRUE(pool);
    SlicePublisher pub(client);
    auto r = pub.sync(*pool);
    ASSERT_TRUE(r) << r.error().message() << "\nsocat: " << read_text(dir_.path() / "socat.log");
    EXPECT_EQ(r->created, pool->slices.size());
    EXPECT_EQ(server_.slices_of("node-1"), pool->slices.size());
    auto again = pub.sync(*pool);  // a list through TLS finds them all: nothing to write
    ASSERT_TRUE(again) << again.error().message();
    EXPECT_EQ(again->writes(), 0u);
  }
  // One request that must fail before reaching the server; its one-line message.
  std::string expect_refused(kube_api::KubeClient& client) {
    auto r = client.request("GET", kResourceSlicesPath);
    EXPECT_FALSE(r) << "answered " << (r ? r->status : 0);
    if (r) return {};
    std::string m = r.error().message();
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_NE(m.find(tls_->url()), std::string::npos) << m;  // names the server
    std::lock_guard<std::mutex> lock(server_.mu);
    EXPECT_EQ(server_.requests, 0u) << "a refused connection reached the API server";
    return m;
  }
  std::string token_user() const { return "    token: test-token\n"; }

  static Pki* pki_;
  TempDir dir_;
  FakeApiServer server_;
  std::unique_ptr<TlsFrontend> tls_;
  HostModel model_;
};
Pki* TlsApiServer::pki_ = nullptr;

TEST_F(TlsApiServer, CertificateAuthorityFilePublishesThroughTls) {
  frontend("server");
  auto client = client_of(
      kubeconfig("    certificate-authority: " + pki_->crt("ca").string() + "\n", token_user()));
  ASSERT_TRUE(client);
  expect_publishes(*client);
}

TEST_F(TlsApiServer, CertificateAuthorityDataAndRelativeTokenFilePublishThroughTls) {
  frontend("server");
  write_text(dir_.path() / "token", "test-token\n");
  auto client = client_of(
      kubeconfig("    certificate-authority-data: " + Pki::base64(pki_->crt("ca")) + "\n",
                 "    tokenFile: token\n"));  // relative to the kubeconfig, as kubectl resolves it
  ASSERT_TRUE(client);
  expect_publishes(*client);
}

TEST_F(TlsApiServer, ServerOfAnotherCaIsRefusedAsUnverified) {
  frontend("other-server");
  auto client = client_of(
      kubeconfig("    certificate-authority: " + pki_->crt("ca").string() + "\n", token_user()));
  ASSERT_TRUE(client);
  std::string m = expect_refused(*client);
  EXPECT_NE(m.find("TLS certificate could not be verified"), std::string::npos) << m;
}

TEST_F(TlsApiServer, ServerCertificateForAnotherNameIsRefusedAsUnverified) {
  frontend("wrong-name");
  auto client = client_of(
      kubeconfig("    certificate-authority: " + pki_->crt("ca").string() + "\n", token_user()));
  ASSERT_TRUE(client);
  std::string m = expect_refused(*client);
  EXPECT_NE(m.find("TLS certificate could not be verified"), std::string::npos) << m;
}

TEST_F(TlsApiServer, InsecureSkipTlsVerifyOnlyWhenTheKubeconfigSaysSo) {
  frontend("other-server");
  // No CA: the system's CAs do not know this one, so it is refused...
  auto strict = client_of(kubeconfig("", token_user()));
  ASSERT_TRUE(strict);
  std::string m = expect_refused(*strict);
  EXPECT_NE(m.find("TLS certificate could not be verified"), std::string::npos) << m;
  auto said_false = client_of(kubeconfig("    insecure-skip-tls-verify: false\n", token_user()));
  ASSERT_TRUE(said_false);
  expect_refused(*said_false);
  // ...and accepted only when the kubeconfig asks for it.
  auto insecure = client_of(kubeconfig("    insecure-skip-tls-verify: true\n", token_user()));
  ASSERT_TRUE(insecure);
  expect_publishes(*insecure);
}

TEST_F(TlsApiServer, ContradictoryOrHalfCredentialsAreRefusedInOneLine) {
  frontend("server");
  struct Case {
    std::string cluster, user, problem;
  } cases[] = {
      {"    insecure-skip-tls-verify: true\n    certificate-authority: " +
           pki_->crt("ca").string() + "\n",
       token_user(), "certificate-authority and insecure-skip-tls-verify together"},
      {"", "    client-certificate: " + pki_->crt("client").string() + "\n",
       "client certificate without its key"},
      {"", "    client-key-data: " + Pki::base64(pki_->key("client")) + "\n",
       "client certificate without its key"},
  };
  for (const auto& k : cases) {
    fs::path p = kubeconfig(k.cluster, k.user);
    auto c = kube_api::kubeconfig_file(p.string());
    ASSERT_FALSE(c) << k.user;
    std::string m = c.error().message();
    EXPECT_EQ(c.error().code, ErrorCode::bad_input);
    EXPECT_NE(m.find(p.string()), std::string::npos) << m;
    EXPECT_NE(m.find(k.problem), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

TEST_F(TlsApiServer, ClientCertificateFilesAuthenticate) {
  frontend("server", "client-ca");
  server_.require_token = false;  // the certificate is the only credential
  auto client =
      client_of(kubeconfig("    certificate-authority: " + pki_->crt("ca").string() + "\n",
                           "    client-certificate: " + pki_->crt("client").string() +
                               "\n    client-key: " + pki_->key("client").string() + "\n"));
  ASSERT_TRUE(client);
  expect_publishes(*client);
}

TEST_F(TlsApiServer, ClientCertificateDataAuthenticates) {
  frontend("server", "client-ca");
  server_.require_token = false;
  auto client = client_of(
      kubeconfig("    certificate-authority-data: " + Pki::base64(pki_->crt("ca")) + "\n",
                 "    client-certificate-data: " + Pki::base64(pki_->crt("client")) +
                     "\n    client-key-data: " + Pki::base64(pki_->key("client")) + "\n"));
  ASSERT_TRUE(client);
  expect_publishes(*client);
}

TEST_F(TlsApiServer, WithoutClientCertificateOrWithAStrangersTheServerRefuses) {
  frontend("server", "client-ca");
  server_.require_token = false;
  auto none = client_of(
      kubeconfig("    certificate-authority: " + pki_->crt("ca").string() + "\n", token_user()));
  ASSERT_TRUE(none);
  std::string m = expect_refused(*none);
  EXPECT_NE(m.find("TLS connection failed"), std::string::npos) << m;
  auto stranger =
      client_of(kubeconfig("    certificate-authority: " + pki_->crt("ca").string() + "\n",
                           "    client-certificate: " + pki_->crt("stranger").string() +
                               "\n    client-key: " + pki_->key("stranger").string() + "\n"));
  ASSERT_TRUE(stranger);
  m = expect_refused(*stranger);
  EXPECT_NE(m.find("TLS connection failed"), std::string::npos) << m;
}

TEST_F(TlsApiServer, InClusterBearerTokenOverTlsAndItsRotation) {
  frontend("server");
  fs::path sa = dir_.path() / "serviceaccount";
  fs::create_directories(sa);
  write_text(sa / "token", "test-token\n");
  fs::copy_file(pki_->crt("ca"), sa / "ca.crt");
  std::string port = tls_->url().substr(tls_->url().rfind(':') + 1);
  ::setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", port.c_str(), 1);
  auto c = kube_api::in_cluster_config(sa.string());
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::unsetenv("KUBERNETES_SERVICE_PORT");
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(c->server, tls_->url());
  kube_api::KubeClient client(*c);
  expect_publishes(client);  // the fake server answers 401 to any other token
  // A bound token rotates: the next request sends the new one.
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.token = "rotated-token";
  }
  write_text(sa / "token", "rotated-token\n");
  auto r = client.request("GET", kResourceSlicesPath);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->status, 200);
}

}  // namespace
}  // namespace polyaccel::dra
