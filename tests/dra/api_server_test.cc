// The slice publisher and claim lookup against a test that plays the API server over real HTTP
// (fake_api_server.h): every object sent is valid by the real resource.k8s.io/v1 schema, a steady
// node makes no writes, changes bump the pool generation across all slices, conflicts, 403s and a
// server that goes away and comes back.
#include <gtest/gtest.h>

#include <fstream>

#include "dra/fake_api_server.h"
#include "dra/plugin.h"
#include "dra/publisher.h"
#include "dra/structured_allocator.h"
#include "kube/models.h"

namespace polyaccel::dra {
namespace {

using nlohmann::json;
using polyaccel::testing::FakeApiServer;
using polyaccel::testing::TempDir;

class ApiServer : public ::testing::Test {
 protected:
  ApiServer() : server_(dir_.path()) {
    KubeConfig c;
    c.server = server_.url();
    c.token = "test-token";
    c.timeout = std::chrono::milliseconds(3000);
    client_ = std::make_unique<KubeClient>(c);
    model_ = polyaccel::testing::load_fixture(polyaccel::testing::kXe8640);
  }
  ~ApiServer() override {
    std::lock_guard<std::mutex> lock(server_.mu);
    EXPECT_TRUE(server_.schema_errors.empty()) << server_.schema_errors.front();
  }

  Pool pool(SliceOptions o = {}) {
    o.node = "node-1";
    auto p = build_pool(model_, o);
    EXPECT_TRUE(p);
    return *p;
  }
  // Every slice of the node on the server: one generation, resourceSliceCount = their number.
  void expect_consistent_pool(const std::string& node, size_t count, std::int64_t generation) {
    std::lock_guard<std::mutex> lock(server_.mu);
    size_t n = 0;
    for (const auto& [name, s] : server_.slices) {
      if (s["spec"]["nodeName"] != node) continue;
      ++n;
      EXPECT_EQ(s["spec"]["pool"]["generation"], generation) << name;
      EXPECT_EQ(s["spec"]["pool"]["resourceSliceCount"], count) << name;
      EXPECT_EQ(s["spec"]["pool"]["name"], node);
    }
    EXPECT_EQ(n, count);
  }

  TempDir dir_;
  FakeApiServer server_;
  std::unique_ptr<KubeClient> client_;
  HostModel model_;
};

TEST_F(ApiServer, PublishesOnceAndASteadyNodeWritesNothing) {
  SlicePublisher pub(*client_);
  Pool p = pool();
  auto r = pub.sync(p);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->created, p.slices.size());
  EXPECT_EQ(r->generation, 1);
  expect_consistent_pool("node-1", p.slices.size(), 1);
  unsigned writes = server_.writes;
  for (int i = 0; i < 20; ++i) {
    auto again = pub.sync(pool());
    ASSERT_TRUE(again);
    EXPECT_EQ(again->writes(), 0u);
  }
  EXPECT_EQ(server_.writes, writes);
  EXPECT_EQ(client_->writes(), writes);
}

// A server with DRADeviceTaints off (1.34's default) stores an unhealthy GPU without its taint:
// the scheduler would hand it out. The dry run says so before anything is stored, the write's
// answer says so after; the pool the runner then builds withdraws the GPU instead.
TEST_F(ApiServer, ATaintTheServerDropsIsSeenAndTheDeviceWithdrawn) {
  SlicePublisher pub(*client_);
  auto kept = pub.probe(kDriverName, "node-1");
  ASSERT_TRUE(kept) << kept.error().message();
  EXPECT_TRUE(kept->counters);
  EXPECT_TRUE(kept->taints);
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.device_taints = false;
  }
  auto probed = pub.probe(kDriverName, "node-1");
  ASSERT_TRUE(probed) << probed.error().message();
  EXPECT_TRUE(probed->counters);
  EXPECT_FALSE(probed->taints);
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    EXPECT_EQ(server_.dry_runs, 2u);
    EXPECT_EQ(server_.writes, 0u) << "a dry run stores nothing";
    EXPECT_TRUE(server_.slices.empty());
  }
  EXPECT_EQ(client_->writes(), 0u);

  SliceOptions sick;
  sick.unhealthy = {"0000:4e:00.0"};
  auto r = pub.sync(pool(sick));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->taints_kept, std::optional<bool>(false));
  EXPECT_FALSE(r->counters_kept.has_value()) << "the XE8640 without MIG uses no counters";
  auto stored_slices = [&] {
    std::lock_guard<std::mutex> lock(server_.mu);
    std::vector<json> out;
    for (const auto& [name, s] : server_.slices)
      out.push_back(s);
    return out;
  };
  std::vector<json> stored = stored_slices();
  polyaccel::testing::StructuredAllocator scheduler;
  scheduler.set_slices(stored);
  polyaccel::testing::ClaimSpec four{{{"gpu", "gpu", {}, 4}}, {}};
  EXPECT_TRUE(scheduler.allocate(four)) << "the taint is gone: the sick GPU is handed out";

  sick.withdraw_unhealthy = true;  // what the runner builds once it knows
  auto w = pub.sync(pool(sick));
  ASSERT_TRUE(w) << w.error().message();
  EXPECT_FALSE(w->taints_kept.has_value()) << "nothing tainted is sent";
  stored = stored_slices();
  polyaccel::testing::StructuredAllocator after;
  after.set_slices(stored);
  EXPECT_FALSE(after.allocate(four)) << "three healthy GPUs are left";
  polyaccel::testing::ClaimSpec three{{{"gpu", "gpu", {}, 3}}, {}};
  auto got = after.allocate(three);
  ASSERT_TRUE(got);
  for (const auto& name : *got)
    EXPECT_NE(name, "gpu-0") << "0000:4e:00.0 is gpu-0";
}

// The claims of deploy/kubernetes/overlays/dra over the XE8640's stored slices, allocated as the
// scheduler does: what kube-scheduler 1.34 gave (four GPUs never twice, two NVLink pairs,
// three GPU+NIC pairs by NUMA node or root complex: cb:00.0 has no RDMA NIC near it).
TEST_F(ApiServer, TheTemplatesClaimsAsTheSchedulerAllocatesThem) {
  SlicePublisher pub(*client_);
  ASSERT_TRUE(pub.sync(pool()));
  std::vector<json> stored;
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    for (const auto& [name, s] : server_.slices)
      stored.push_back(s);
  }
  using polyaccel::testing::ClaimSpec;
  auto fill = [&](const ClaimSpec& claim) {
    polyaccel::testing::StructuredAllocator scheduler;
    scheduler.set_slices(stored);
    unsigned n = 0;
    while (scheduler.allocate(claim) && n < 16)
      ++n;
    return n;
  };
  ClaimSpec one_gpu{{{"gpu", "gpu", {}, 1}}, {}};
  EXPECT_EQ(fill(one_gpu), 4u);
  ClaimSpec nvlink_pair{
      {{"gpus", "gpu",
        [](const json& d) {
          return !polyaccel::testing::device_attribute(d, "polyaccel.io/nvlinkDomain").is_null();
        },
        2}},
      {{{"gpus"}, "polyaccel.io/nvlinkDomain"}}};
  EXPECT_EQ(fill(nvlink_pair), 2u);
  for (const char* attribute :
       {"resource.kubernetes.io/numaNode", "resource.kubernetes.io/pcieRoot"}) {
    ClaimSpec gpu_nic{{{"gpu", "gpu", {}, 1}, {"nic", "nic", {}, 1}},
                      {{{"gpu", "nic"}, attribute}}};
    EXPECT_EQ(fill(gpu_nic), 3u) << attribute;
  }
}

TEST_F(ApiServer, AChangeUpdatesEverySliceWithTheNextGenerationAndDeletesExtras) {
  SlicePublisher pub(*client_);
  // Another node's slices are not ours to touch.
  {
    SliceOptions o;
    o.node = "node-2";
    ASSERT_TRUE(pub.sync(*build_pool(model_, o)));
  }
  ASSERT_TRUE(pub.sync(pool()));
  // A GPU turns unhealthy: tainted (the server stamps timeAdded; that is no difference later).
  SliceOptions sick;
  sick.unhealthy = {"0000:4e:00.0"};
  auto r = pub.sync(pool(sick));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->generation, 2);
  EXPECT_GT(r->updated, 0u);
  expect_consistent_pool("node-1", pool(sick).slices.size(), 2);
  auto steady = pub.sync(pool(sick));
  ASSERT_TRUE(steady);
  EXPECT_EQ(steady->writes(), 0u) << "timeAdded set by the server is not a change";
  // Back to healthy, then a pool with fewer slices (all devices withdrawn): the extras go.
  ASSERT_TRUE(pub.sync(pool()));
  expect_consistent_pool("node-1", pool().slices.size(), 3);
  Pool empty{kDriverName, "node-1", {}};
  auto gone = pub.sync(empty);
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->deleted, pool().slices.size());
  EXPECT_EQ(server_.slices_of("node-1"), 0u);
  EXPECT_GT(server_.slices_of("node-2"), 0u);
}

TEST_F(ApiServer, AConflictListsAgainAndRetries) {
  SlicePublisher pub(*client_);
  ASSERT_TRUE(pub.sync(pool()));
  SliceOptions sick;
  sick.unhealthy = {"0000:5f:00.0"};
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.conflict_next_writes = 2;
  }
  auto r = pub.sync(pool(sick));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(server_.conflicts_sent, 2u);
  expect_consistent_pool("node-1", pool(sick).slices.size(), r->generation);
}

TEST_F(ApiServer, ForbiddenSaysWhichRbacIsMissingAndChangesNothing) {
  SlicePublisher pub(*client_);
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.forbid_writes = true;
  }
  auto r = pub.sync(pool());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().problem.find("403"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().remedy.find("resourceslices"), std::string::npos);
  EXPECT_EQ(server_.slices_of("node-1"), 0u);
}

TEST_F(ApiServer, AServerThatGoesAwayAndComesBack) {
  SlicePublisher pub(*client_);
  ASSERT_TRUE(pub.sync(pool()));
  server_.stop();
  auto down = pub.sync(pool());
  ASSERT_FALSE(down);
  EXPECT_EQ(down.error().code, ErrorCode::io);
  server_.restart();
  SliceOptions sick;
  sick.unhealthy = {"0000:4e:00.0"};
  auto up = pub.sync(pool(sick));
  ASSERT_TRUE(up) << up.error().message();
  EXPECT_EQ(up->generation, 2);
}

TEST_F(ApiServer, AWrongTokenOrNoServerIsAnError) {
  KubeConfig c = client_->config();
  c.token = "wrong";
  KubeClient bad_token(c);
  auto r = SlicePublisher(bad_token).sync(pool());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().problem.find("401"), std::string::npos);
  c = client_->config();
  c.server = "http://127.0.0.1:1";  // nothing listens there
  KubeClient nobody(c);
  auto t = nobody.request("GET", kResourceSlicesPath);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().code, ErrorCode::io);
}

TEST_F(ApiServer, ClaimLookupReadsTheAllocationForOurDriver) {
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.claims["ns1/train"] = json::parse(R"({
      "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
      "metadata": {"name": "train", "namespace": "ns1", "uid": "0b8e1c2a-1111-2222-3333-444455556666"},
      "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.polyaccel.io"}}]}},
      "status": {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": "polyaccel.io", "pool": "node-1", "device": "gpu-0"},
        {"request": "nic", "driver": "polyaccel.io", "pool": "node-1", "device": "nic-2"},
        {"request": "other", "driver": "gpu.nvidia.com", "pool": "node-1", "device": "gpu-0"}]}}}
    })");
    auto errors = polyaccel::testing::K8sSchema().validate(server_.claims["ns1/train"],
                                                           "io.k8s.api.resource.v1.ResourceClaim");
    EXPECT_TRUE(errors.empty()) << errors.front();
  }
  auto lookup = api_claim_lookup(*client_);
  auto c = lookup("ns1", "train");
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(c->uid, "0b8e1c2a-1111-2222-3333-444455556666");
  ASSERT_EQ(c->devices.size(), 3u);
  EXPECT_EQ(c->devices[1].device, "nic-2");
  auto missing = lookup("ns1", "nope");
  EXPECT_FALSE(missing);
}

TEST(KubeConfigTest, KubeconfigAndInClusterConfig) {
  TempDir d;
  std::ofstream(d.path() / "ca.crt")
      << "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  std::ofstream(d.path() / "kubeconfig") << R"(apiVersion: v1
kind: Config
current-context: b
contexts:
- name: a
  context: {cluster: one, user: u1}
- name: b
  context: {cluster: two, user: u2}
clusters:
- name: one
  cluster: {server: "https://one:6443"}
- name: two
  cluster:
    server: "https://two:6443/"
    certificate-authority: ca.crt
users:
- name: u1
  user: {token: t1}
- name: u2
  user:
    token: t2
)";
  auto k = kubeconfig_file((d.path() / "kubeconfig").string());
  ASSERT_TRUE(k) << k.error().message();
  EXPECT_EQ(k->server, "https://two:6443");
  EXPECT_EQ(k->token, "t2");
  EXPECT_NE(k->ca_pem.find("BEGIN CERTIFICATE"), std::string::npos);
  std::ofstream(d.path() / "bad") << "{{{";
  EXPECT_FALSE(kubeconfig_file((d.path() / "bad").string()));
  EXPECT_FALSE(kubeconfig_file((d.path() / "absent").string()));

  std::ofstream(d.path() / "token") << "sa-token\n";
  ::setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto ic = in_cluster_config(d.path().string());
  ASSERT_TRUE(ic) << ic.error().message();
  EXPECT_EQ(ic->server, "https://10.96.0.1:443");
  EXPECT_EQ(ic->token, "sa-token");
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  EXPECT_FALSE(in_cluster_config(d.path().string()));
}

// The server as client-go takes it (a URL, or host:port as https); what cannot be one is refused
// naming the file, never left to become a request to "" + path (a fuzz finding: server "/").
TEST(KubeConfigTest, ServerIsAnApiServerUrlOrRefused) {
  TempDir d;
  auto with_server = [&](const std::string& server) {
    std::ofstream(d.path() / "kubeconfig", std::ios::trunc)
        << "clusters:\n- name: c\n  cluster:\n    server: '" << server << "'\n";
    return kubeconfig_file((d.path() / "kubeconfig").string());
  };
  const std::pair<const char*, const char*> accepted[] = {
      {"https://two:6443/", "https://two:6443"},
      {"two:6443", "https://two:6443"},
      {"HTTPS://Two:6443", "https://Two:6443"},
      {"http://127.0.0.1:8080", "http://127.0.0.1:8080"},
      {"https://[fd00::1]:6443", "https://[fd00::1]:6443"},
      {"https://rancher.example/k8s/clusters/c-1//", "https://rancher.example/k8s/clusters/c-1"},
  };
  for (const auto& [server, url] : accepted) {
    auto k = with_server(server);
    ASSERT_TRUE(k) << server << ": " << k.error().message();
    EXPECT_EQ(k->server, url) << server;
  }
  for (const char* server :
       {"", "/", "///", "https://", "https:///x", "https://:6443", "ftp://two:6443",
        "https://two:6443/?watch=1", "https://two #x", "unix:///var/run/k8s.sock"}) {
    auto k = with_server(server);
    ASSERT_FALSE(k) << server << " gave " << k->server;
    EXPECT_EQ(k.error().code, ErrorCode::bad_input) << server;
    EXPECT_NE(k.error().message().find("kubeconfig"), std::string::npos) << k.error().message();
    EXPECT_NE(k.error().message().find("cluster server"), std::string::npos) << k.error().message();
  }
}

}  // namespace
}  // namespace polyaccel::dra
