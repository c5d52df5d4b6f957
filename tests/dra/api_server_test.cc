// The slice publisher and claim lookup against a test that plays the API server over real HTTP
// (fake_api_server.h): every object sent is valid by the real resource.k8s.io/v1 schema, a steady
// node makes no writes, changes bump the pool generation across all slices, conflicts, 403s and a
// server that goes away and comes back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "dra/claim_status.h"
#include "dra/dra_rbac.h"
#include "dra/fake_api_server.h"
#include "dra/plugin.h"
#include "dra/publisher.h"
#include "dra/structured_allocator.h"
#include "kube/models.h"

namespace polyaccel::dra {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using polyaccel::testing::FakeApiServer;
using polyaccel::testing::TempDir;

class ApiServer : public ::testing::Test {
 protected:
  ApiServer() : server_(dir_.path()) {
    kube_api::KubeConfig c;
    c.server = server_.url();
    c.token = "test-token";
    c.timeout = std::chrono::milliseconds(3000);
    client_ = std::make_unique<kube_api::KubeClient>(c);
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
  std::unique_ptr<kube_api::KubeClient> client_;
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

// DRAConsumableCapacity off (1.34's and 1.35's default): the server drops allowMultipleAllocations
// and the requestPolicy, and the dry run says so (shared NICs are then published whole).
TEST_F(ApiServer, SharingTheServerDropsIsSeenByTheDryRun) {
  SlicePublisher pub(*client_);
  auto kept = pub.probe(kDriverName, "node-1");
  ASSERT_TRUE(kept) << kept.error().message();
  EXPECT_TRUE(kept->shares);
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.consumable_capacity = false;
  }
  auto probed = pub.probe(kDriverName, "node-1");
  ASSERT_TRUE(probed) << probed.error().message();
  EXPECT_FALSE(probed->shares);
  EXPECT_TRUE(probed->counters);
  EXPECT_TRUE(probed->taints);
  std::lock_guard<std::mutex> lock(server_.mu);
  EXPECT_THAT(server_.schema_errors, ::testing::IsEmpty());
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
  // Nothing tainted is sent now; the slice stored from the last write still shows the taint we
  // sent then was dropped.
  EXPECT_EQ(w->taints_kept, std::optional<bool>(false));
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

// The dry run on servers of each version and gate: what they keep and the layout they take,
// from the servers' own answers. 1.34 with DRAPartitionableDevices on refuses a device that
// consumes a counter set of another slice (one 422, then the second dry run); with the gate off
// the counters are dropped before validation, so nothing is refused and none are kept. Nothing
// is stored; GET /version says which version the test server plays.
TEST_F(ApiServer, TheDryRunFindsTheLayoutEachVersionTakes) {
  SlicePublisher pub(*client_);
  struct Case {
    unsigned minor;
    bool gates;
    CounterLayout layout;
    unsigned dry_runs;
  };
  for (const Case& c :
       {Case{34, true, CounterLayout::with_devices, 2},
        Case{34, false, CounterLayout::own_slices, 1}, Case{35, true, CounterLayout::own_slices, 1},
        Case{35, false, CounterLayout::own_slices, 1}, Case{36, true, CounterLayout::own_slices, 1},
        Case{37, true, CounterLayout::own_slices, 1}}) {
    SCOPED_TRACE("1." + std::to_string(c.minor) + (c.gates ? " gates on" : " gates off"));
    server_.play(c.minor);
    unsigned before;
    {
      std::lock_guard<std::mutex> lock(server_.mu);
      server_.partitionable_devices = server_.device_taints = c.gates;
      before = server_.dry_runs + static_cast<unsigned>(server_.refusals.size());
    }
    auto version = client_->request("GET", "/version");
    ASSERT_TRUE(version);
    EXPECT_EQ(json::parse(version->body)["minor"], std::to_string(c.minor));
    auto fields = pub.probe(kDriverName, "node-1");
    ASSERT_TRUE(fields) << fields.error().message();
    EXPECT_EQ(fields->counters, c.gates);
    EXPECT_EQ(fields->taints, c.gates);
    if (c.gates) {
      EXPECT_EQ(fields->layout, c.layout);
    }
    std::lock_guard<std::mutex> lock(server_.mu);
    EXPECT_EQ(server_.dry_runs + server_.refusals.size() - before, c.dry_runs);
    EXPECT_EQ(server_.refused_writes, 0u);
    EXPECT_TRUE(server_.slices.empty());
  }
}

// A write the server refuses for its layout says which one it takes, and a pool built so is
// then taken: 1.36 refuses 1.34's slices ("only one of `sharedCounters` or `devices` is
// allowed"), 1.34 refuses 1.36's. An AMD node (the MI250X capture, four partitions a GPU) with
// its counter sets gpu-<i>-partitions.
TEST_F(ApiServer, ARefusedLayoutIsNamedAndTheOtherIsTaken) {
  HostModel amd = polyaccel::testing::load_fixture(polyaccel::testing::kMi250x);
  for (auto& a : amd.accelerators)
    if (a.vendor == Vendor::amd) a.partitions = 4;
  auto build = [&](CounterLayout layout) {
    SliceOptions o;
    o.node = "node-1";
    o.layout = layout;
    auto p = build_pool(amd, o);
    EXPECT_TRUE(p);
    return *p;
  };
  for (unsigned minor : {34u, 36u}) {
    SCOPED_TRACE("1." + std::to_string(minor));
    server_.play(minor);
    {
      std::lock_guard<std::mutex> lock(server_.mu);
      server_.partitionable_devices = server_.device_taints = true;
      server_.slices.clear();
    }
    const CounterLayout right =
        minor == 34 ? CounterLayout::with_devices : CounterLayout::own_slices;
    const CounterLayout wrong =
        minor == 34 ? CounterLayout::own_slices : CounterLayout::with_devices;
    SlicePublisher pub(*client_);
    auto refused = pub.sync(build(wrong));
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message().find("HTTP 422"), std::string::npos)
        << refused.error().message();
    EXPECT_EQ(pub.take_layout_wanted(), right);
    EXPECT_EQ(pub.take_layout_wanted(), std::nullopt) << "said once";
    auto taken = pub.sync(build(right));
    ASSERT_TRUE(taken) << taken.error().message();
    EXPECT_EQ(taken->counters_kept, std::optional<bool>(true));
    std::vector<json> stored;
    {
      std::lock_guard<std::mutex> lock(server_.mu);
      for (const auto& [name, s] : server_.slices)
        stored.push_back(s);
    }
    expect_consistent_pool("node-1", stored.size(), taken->generation);
    polyaccel::testing::StructuredAllocator scheduler;
    scheduler.kubernetes_minor = minor;
    scheduler.set_slices(stored);
    polyaccel::testing::ClaimSpec one{{{"p", "gpu-partition", {}, 1}}, {}};
    size_t allocated = 0;
    while (scheduler.allocate(one) && allocated < 1000)
      ++allocated;
    size_t partitions = 0;
    for (const auto& a : amd.accelerators)
      if (a.vendor == Vendor::amd) partitions += 4;
    EXPECT_EQ(allocated, partitions) << "each partition once, no more than a GPU holds";
    EXPECT_TRUE(pub.sync(build(right))) << "steady";
  }
}

// The claims of deploy/kubernetes/examples/dra-claims over the XE8640's stored slices, allocated as
// the scheduler does: what kube-scheduler 1.34 gave (four GPUs never twice, two NVLink pairs, three
// GPU+NIC pairs by NUMA node or root complex: cb:00.0 has no RDMA NIC near it).
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

// Least privilege (issue 29): what the RBAC of the DRA overlays grants the agent is exactly what
// the DRA driver asks of the API server. Every call site of kube_api::KubeClient::request and
// ::watch in src/dra/ is exercised here (the publisher's list, create, update, delete and dry-run
// create; the runner's watch of the pool's slices; the plugin's claim lookup; a NIC's claim status
// with the synthetic resourceclaims/driver check of 1.36), and the requests the server saw are
// turned into (apiGroup, resource, verb) as its authorizer would.
TEST_F(ApiServer, RbacGrantsExactlyWhatTheDriverAsks) {
  SlicePublisher pub(*client_);
  ASSERT_TRUE(pub.sync(pool()));
  SliceOptions sick;
  sick.unhealthy = {"0000:4e:00.0"};
  ASSERT_TRUE(pub.sync(pool(sick)));
  ASSERT_TRUE(pub.sync(Pool{kDriverName, "node-1", {}}));
  ASSERT_TRUE(pub.probe(kDriverName, "node-1"));  // a dry-run create
  // The runner's watch of the pool's slices (DraRunner::watch_slices): ended at once.
  auto watched = client_->watch(
      pool_slices_path(kDriverName, "node-1") + "&watch=1&timeoutSeconds=1",
      [](const std::string&) { return false; }, [] { return true; }, std::chrono::seconds(5));
  ASSERT_TRUE(watched) << watched.error().message();
  EXPECT_EQ(watched->status, 200);
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.claims["ns1/c"] =
        json{{"metadata", {{"name", "c"}, {"namespace", "ns1"}, {"uid", "u"}}}};
  }
  (void)api_claim_lookup (*client_)("ns1", "c");
  // The status of a prepared NIC (claim_status.h), on a claim allocated to this node.
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.claims["ns1/c"] = json::parse(R"({
      "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
      "metadata": {"name": "c", "namespace": "ns1", "uid": "u", "resourceVersion": "7"},
      "spec": {"devices": {"requests": [{"name": "nic", "exactly": {"deviceClassName": "rdma-nic.polyaccel.io"}}]}},
      "status": {"allocation": {
        "devices": {"results": [{"request": "nic", "driver": "polyaccel.io", "pool": "node-1", "device": "nic-2"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}}}
    })");
  }
  json entry = {{"driver", "polyaccel.io"}, {"pool", "node-1"}, {"device", "nic-2"}};
  Status written = write_claim_device_status(*client_, "ns1", "c", "u", kDriverName, {entry});
  EXPECT_TRUE(written) << written.error().message();
  std::set<RbacAttributes> used;
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    for (const auto& [method, target] : server_.seen)
      used.insert(rbac_attributes(method, target));
    // The authorizer's checks beyond the request itself (the synthetic resourceclaims/driver).
    for (const auto& a : server_.authorized) {
      std::istringstream in(a);
      std::string group, resource, verb, arrow, answer;
      in >> group >> resource >> verb >> arrow >> answer;
      if (answer == "allow") used.insert({group, resource, verb});
    }
  }
  const std::set<RbacAttributes> granted = granted_to_agent();
  for (const auto& u : used)
    EXPECT_TRUE(granted.count(u)) << "used, not granted: " << std::get<0>(u) << " "
                                  << std::get<1>(u) << " " << std::get<2>(u);
  for (const auto& g : granted)
    EXPECT_TRUE(used.count(g)) << "granted, never used: " << std::get<0>(g) << " " << std::get<1>(g)
                               << " " << std::get<2>(g);
  EXPECT_FALSE(used.empty());
  // The scenario above covers every call site: a new one must be added to it.
  std::regex call(R"re(\.request\(\s*"(GET|POST|PUT|PATCH|DELETE)")re");
  std::regex watch_call(R"re(->watch\(\s*path)re");
  std::vector<std::string> sites;
  for (const auto& e :
       fs::recursive_directory_iterator(fs::path(POLYACCEL_SOURCE_DIR) / "src/dra")) {
    if (e.path().extension() != ".cc") continue;
    std::ifstream in(e.path());
    std::string text((std::istreambuf_iterator<char>(in)), {});
    for (std::sregex_iterator m(text.begin(), text.end(), call), end; m != end; ++m)
      sites.push_back(e.path().filename().string() + " " + (*m)[1].str());
    for (std::sregex_iterator m(text.begin(), text.end(), watch_call), end; m != end; ++m)
      sites.push_back(e.path().filename().string() + " watch");
  }
  std::sort(sites.begin(), sites.end());
  EXPECT_EQ(sites, (std::vector<std::string>{
                       "claim_status.cc GET", "claim_status.cc PUT", "plugin.cc GET",
                       "publisher.cc DELETE", "publisher.cc GET", "publisher.cc POST",
                       "publisher.cc POST", "publisher.cc PUT", "runner.cc watch"}))
      << "a new API call: exercise it in this test so that RBAC is checked against it";
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
  kube_api::KubeConfig c = client_->config();
  c.token = "wrong";
  kube_api::KubeClient bad_token(c);
  auto r = SlicePublisher(bad_token).sync(pool());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().problem.find("401"), std::string::npos);
  c = client_->config();
  c.server = "http://127.0.0.1:1";  // nothing listens there
  kube_api::KubeClient nobody(c);
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
  auto k = kube_api::kubeconfig_file((d.path() / "kubeconfig").string());
  ASSERT_TRUE(k) << k.error().message();
  EXPECT_EQ(k->server, "https://two:6443");
  EXPECT_EQ(k->token, "t2");
  EXPECT_NE(k->ca_pem.find("BEGIN CERTIFICATE"), std::string::npos);
  std::ofstream(d.path() / "bad") << "{{{";
  EXPECT_FALSE(kube_api::kubeconfig_file((d.path() / "bad").string()));
  EXPECT_FALSE(kube_api::kubeconfig_file((d.path() / "absent").string()));

  std::ofstream(d.path() / "token") << "sa-token\n";
  ::setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto ic = kube_api::in_cluster_config(d.path().string());
  ASSERT_TRUE(ic) << ic.error().message();
  EXPECT_EQ(ic->server, "https://10.96.0.1:443");
  EXPECT_EQ(ic->token, "sa-token");
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  EXPECT_FALSE(kube_api::in_cluster_config(d.path().string()));
}

// The server as client-go takes it (a URL, or host:port as https); what cannot be one is refused
// naming the file, never left to become a request to "" + path (a fuzz finding: server "/").
TEST(KubeConfigTest, ServerIsAnApiServerUrlOrRefused) {
  TempDir d;
  auto with_server = [&](const std::string& server) {
    std::ofstream(d.path() / "kubeconfig", std::ios::trunc)
        << "clusters:\n- name: c\n  cluster:\n    server: '" << server << "'\n";
    return kube_api::kubeconfig_file((d.path() / "kubeconfig").string());
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
  // Ports as the kernel takes them (issue 29: 99999 and 4294967297 were taken at start and every
  // publish failed after); credentials in the URL are refused without being echoed.
  EXPECT_TRUE(with_server("https://two:65535"));
  EXPECT_TRUE(with_server("https://[fd00::1]"));
  for (const char* server :
       {"https://two:99999", "http://127.0.0.1:4294967297", "https://two:0",
        "https://two:", "https://two:-1", "https://two:+443", "https://[fd00::1]:70000",
        "https://[fd00::1", "https://fd00::1:6443", "two:65536", "http://user:s3cret@127.0.0.1:1",
        "https://:s3cret@two:6443", "https://s3cret@two"}) {
    auto k = with_server(server);
    ASSERT_FALSE(k) << server << " gave " << k->server;
    EXPECT_EQ(k.error().code, ErrorCode::bad_input) << server;
    EXPECT_EQ(k.error().message().find("s3cret"), std::string::npos) << k.error().message();
    EXPECT_NE(k.error().message().find("kubeconfig"), std::string::npos) << k.error().message();
  }
  ::setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "99999", 1);
  auto in_pod = kube_api::in_cluster_config(d.path().string());
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::unsetenv("KUBERNETES_SERVICE_PORT");
  ASSERT_FALSE(in_pod);
  EXPECT_NE(in_pod.error().message().find("KUBERNETES_SERVICE_PORT"), std::string::npos)
      << in_pod.error().message();
}

// A kubeconfig with one user whose `user:` mapping is `user_yaml`.
std::string kubeconfig_with_user(const std::string& server, const std::string& user_yaml) {
  return "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: ci}\n"
         "clusters:\n- name: k\n  cluster: {server: \"" +
         server + "\"}\nusers:\n- name: ci\n  user:\n" + user_yaml;
}

// Issue 29: a token with CR/LF added a header to every request, a NUL cut it short. Every value
// that goes into a header is refused with a control character, naming the field and the file,
// never echoing the secret; so is a token file that gains one later.
TEST(KubeConfigTest, ControlCharactersInTokensAreRefusedAndNeverEchoed) {
  TempDir d;
  const fs::path kubeconfig = d.path() / "kubeconfig";
  auto load = [&](const std::string& user_yaml) {
    std::ofstream(kubeconfig, std::ios::trunc)
        << kubeconfig_with_user("https://two:6443", user_yaml);
    return kube_api::kubeconfig_file(kubeconfig.string());
  };
  const std::pair<const char*, const char*> inline_tokens[] = {
      {"    token: \"s3cret\\r\\nX-Injected: yes\"\n", "byte 0x0d"},
      {"    token: \"s3cret\\nX-Injected: yes\"\n", "byte 0x0a"},
      {"    token: \"s3cret\\0tail\"\n", "byte 0x00"},
      {"    token: \"s3cret\\ttail\"\n", "byte 0x09"},
      {"    token: \"s3cret\\x7ftail\"\n", "byte 0x7f"},
  };
  for (const auto& [yaml, byte] : inline_tokens) {
    auto k = load(yaml);
    ASSERT_FALSE(k) << yaml;
    const std::string m = k.error().message();
    EXPECT_EQ(k.error().code, ErrorCode::bad_input) << m;
    EXPECT_NE(m.find(kubeconfig.string()), std::string::npos) << m;
    EXPECT_NE(m.find("user ci: token"), std::string::npos) << m;
    EXPECT_NE(m.find(byte), std::string::npos) << m;
    EXPECT_EQ(m.find("s3cret"), std::string::npos) << m;
    EXPECT_EQ(m.find("Injected"), std::string::npos) << m;
  }
  // The same in a tokenFile (a trailing newline is what files end with, and is fine).
  std::ofstream(d.path() / "token") << "s3cret\r\nX-Injected: yes\n";
  auto from_file = load("    tokenFile: token\n");
  ASSERT_FALSE(from_file);
  EXPECT_NE(from_file.error().message().find("tokenFile " + (d.path() / "token").string()),
            std::string::npos)
      << from_file.error().message();
  EXPECT_EQ(from_file.error().message().find("s3cret"), std::string::npos);
  std::ofstream(d.path() / "token", std::ios::trunc) << "good-token\n";
  auto good = load("    tokenFile: token\n");
  ASSERT_TRUE(good) << good.error().message();
  EXPECT_EQ(good->token, "good-token");
  // issue 40 (4): the token itself put where its file's path belongs: refused, never echoed.
  const std::string jwt =
      "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2lnbmF0dXJl";
  auto pasted = load("    tokenFile: " + jwt + "\n");
  ASSERT_FALSE(pasted);
  EXPECT_EQ(pasted.error().message().find("eyJhbGciOi"), std::string::npos)
      << pasted.error().message();
  EXPECT_NE(pasted.error().message().find("looks like a key or a token"), std::string::npos)
      << pasted.error().message();
  // A tokenFile that cannot be read: its path and why.
  auto absent = load("    tokenFile: absent-token\n");
  ASSERT_FALSE(absent);
  EXPECT_NE(absent.error().message().find((d.path() / "absent-token").string() +
                                          " cannot be read: no such file"),
            std::string::npos)
      << absent.error().message();
  ::mkfifo((d.path() / "fifo-token").c_str(), 0600);
  auto fifo = load("    tokenFile: fifo-token\n");
  ASSERT_FALSE(fifo);
  EXPECT_NE(fifo.error().message().find("is a FIFO"), std::string::npos) << fifo.error().message();
  // The service account's token in a pod.
  std::ofstream(d.path() / "ca.crt") << "-----BEGIN CERTIFICATE-----\n";
  std::ofstream(d.path() / "token", std::ios::trunc) << "s3cret\nX-Injected: yes\n";
  ::setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto in_pod = kube_api::in_cluster_config(d.path().string());
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::unsetenv("KUBERNETES_SERVICE_PORT");
  ASSERT_FALSE(in_pod);
  EXPECT_NE(in_pod.error().message().find("byte 0x0a"), std::string::npos)
      << in_pod.error().message();
  EXPECT_EQ(in_pod.error().message().find("s3cret"), std::string::npos);
}

// A token file re-read for each request (bound tokens rotate) that gains a CR/LF is not sent:
// the request fails naming the file, and the server never sees a header of the file's making.
TEST_F(ApiServer, ARotatedTokenFileWithControlCharactersIsNotSent) {
  kube_api::KubeConfig c = client_->config();
  c.token_file = (dir_.path() / "rotating-token").string();
  std::ofstream(c.token_file) << "test-token\n";
  kube_api::KubeClient rotating(c);
  auto first = rotating.request("GET", kResourceSlicesPath);
  ASSERT_TRUE(first) << first.error().message();
  EXPECT_EQ(first->status, 200);
  std::ofstream(c.token_file, std::ios::trunc) << "test-token\r\nX-Injected: s3cret\n";
  unsigned before;
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    before = server_.requests;
  }
  auto second = rotating.request("GET", kResourceSlicesPath);
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code, ErrorCode::bad_input);
  EXPECT_NE(second.error().message().find(c.token_file), std::string::npos)
      << second.error().message();
  EXPECT_EQ(second.error().message().find("s3cret"), std::string::npos);
  std::lock_guard<std::mutex> lock(server_.mu);
  EXPECT_EQ(server_.requests, before);
}

// A 401 blames the credential the request carried: the kubeconfig user's token, not "the
// service account token"; and no error ever holds the token itself.
TEST_F(ApiServer, UnauthorizedNamesTheCredentialInUseAndNeverTheSecret) {
  const std::string secret = "PLANTED-s3cret-0123456789";
  std::ofstream(dir_.path() / "kubeconfig")
      << kubeconfig_with_user(server_.url(), "    token: " + secret + "\n");
  auto config = kube_api::kubeconfig_file((dir_.path() / "kubeconfig").string());
  ASSERT_TRUE(config) << config.error().message();
  kube_api::KubeClient client(*config);
  auto r = SlicePublisher(client).sync(pool());
  ASSERT_FALSE(r);
  const std::string m = r.error().message();
  EXPECT_NE(m.find("401"), std::string::npos) << m;
  EXPECT_NE(m.find("user ci's token in the kubeconfig"), std::string::npos) << m;
  EXPECT_EQ(m.find("service account"), std::string::npos) << m;
  EXPECT_EQ(m.find(secret), std::string::npos) << m;
  // A transport failure names the URL, never the token.
  kube_api::KubeConfig nowhere = *config;
  nowhere.server = "http://127.0.0.1:1";
  auto t = kube_api::KubeClient(nowhere).request("GET", kResourceSlicesPath);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().message().find(secret), std::string::npos) << t.error().message();
}

}  // namespace
}  // namespace polyaccel::dra
