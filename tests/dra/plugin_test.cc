// The DRA kubelet plugin with a test that plays kubelet over real gRPC (the DRA v1 and v1beta1
// and plugin registration protos): registration through the plugin watcher's socket, prepare,
// unprepare, repeats, and restarts of either side. CDI specs land in a CDI directory. The health
// stream (dra-health v1alpha1) as kubelet reads it: the state at once, each change, devices that
// go, the bound on streams, and its end when the plugin stops.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <functional>

#include "dra/dra_fixture.h"
#include "dra/kubelet_dra_client.h"
#include "dra/kubelet_health_client.h"
#include "dra/plugin.h"
#include "kube/proto/dra_v1.grpc.pb.h"
#include "kube/proto/dra_v1beta1.grpc.pb.h"
#include "kube/proto/pluginregistration_v1.grpc.pb.h"

namespace polyaccel::dra {
namespace {

namespace fs = std::filesystem;
using polyaccel::testing::kUidA;
using polyaccel::testing::kUidB;
using polyaccel::testing::kUidC;
using polyaccel::testing::TempDir;
using polyaccel::testing::write_text;
namespace v1 = k8s::io::kubelet::pkg::apis::dra::v1;
namespace v1beta1 = k8s::io::kubelet::pkg::apis::dra::v1beta1;

class Kubelet : public ::testing::Test {
 protected:
  Kubelet() {
    model_ = polyaccel::testing::load_fixture(polyaccel::testing::kXe8640);
    // What the nvidia driver and ib_uverbs show in /proc and /sys.
    polyaccel::testing::write_nvidia_minors(root(),
                                            polyaccel::testing::accelerator_bus_ids(model_));
    polyaccel::testing::write_uverbs(root(), 4);
    SliceOptions so;
    so.node = "node-1";
    pool_ = *build_pool(model_, so);
    allocation_[kUidA] = {{"gpu", kDriverName, "node-1", "gpu-0"},
                          {"nic", kDriverName, "node-1", "nic-2"},
                          {"x", "gpu.nvidia.com", "node-1", "gpu-0"}};
    allocation_[kUidB] = {{"gpu", kDriverName, "node-1", "gpu-0"}};
  }
  ~Kubelet() override {
    if (plugin_) plugin_->stop();
  }

  fs::path root() const { return dir_.path() / "root"; }
  fs::path cdi_dir() const { return dir_.path() / "cdi"; }

  void start_plugin(std::function<void(DraPluginOptions&)> tune = {}) {
    DraPluginOptions o = polyaccel::testing::dra_plugin_options(dir_.path());
    if (tune) tune(o);
    o.lookup = [this](const std::string& ns, const std::string& name) -> Result<ClaimInfo> {
      ++lookups_;
      std::string uid = name == "a" ? kUidA : name == "b" ? kUidB : name == "c" ? kUidC : "";
      if (ns != "ns1" || uid.empty()) return Error{ErrorCode::not_found, name, "no such claim", {}};
      return ClaimInfo{uid, allocation_[uid]};
    };
    plugin_ = std::make_unique<DraPlugin>(o);
    Status st = plugin_->start(model_, pool_, read_cdi_host(model_, root().string()));
    ASSERT_TRUE(st) << st.error().message();
  }

  // kubelet's plugin watcher: GetInfo, then NotifyRegistrationStatus.
  pluginregistration::PluginInfo register_plugin() {
    auto ch = grpc::CreateChannel("unix:" + plugin_->registration_socket(),
                                  grpc::InsecureChannelCredentials());
    auto reg = pluginregistration::Registration::NewStub(ch);
    pluginregistration::PluginInfo info;
    grpc::ClientContext ctx;
    EXPECT_TRUE(reg->GetInfo(&ctx, {}, &info).ok());
    pluginregistration::RegistrationStatus st;
    st.set_plugin_registered(true);
    pluginregistration::RegistrationStatusResponse r;
    grpc::ClientContext ctx2;
    EXPECT_TRUE(reg->NotifyRegistrationStatus(&ctx2, st, &r).ok());
    return info;
  }

  template <class Stub>
  std::unique_ptr<Stub> dial() {
    auto ch =
        grpc::CreateChannel("unix:" + plugin_->endpoint(), grpc::InsecureChannelCredentials());
    return std::make_unique<Stub>(ch);
  }

  v1::NodePrepareResourcesResponse prepare_v1(const polyaccel::testing::DraClaims& claims) {
    return polyaccel::testing::node_prepare(plugin_->endpoint(), claims);
  }

  v1::NodeUnprepareResourcesResponse unprepare_v1(const std::string& name, const std::string& uid) {
    return polyaccel::testing::node_unprepare(plugin_->endpoint(), {{name, uid}});
  }

  TempDir dir_;
  HostModel model_;
  Pool pool_;
  std::map<std::string, std::vector<AllocatedDevice>> allocation_;
  std::unique_ptr<DraPlugin> plugin_;
  // Counted on the plugin's gRPC threads, read by the test: gRPC's own synchronisation between
  // the two is invisible to ThreadSanitizer (an uninstrumented library).
  std::atomic<int> lookups_ = 0;
};

TEST_F(Kubelet, RegistersAsDraPluginWithV1First) {
  start_plugin();
  EXPECT_TRUE(fs::exists(plugin_->registration_socket()));
  EXPECT_EQ(fs::path(plugin_->registration_socket()).filename(), "polyaccel.io-reg.sock");
  auto info = register_plugin();
  EXPECT_EQ(info.type(), "DRAPlugin");
  EXPECT_EQ(info.name(), "polyaccel.io");
  EXPECT_EQ(info.endpoint(), plugin_->endpoint());
  EXPECT_TRUE(fs::path(info.endpoint()).is_absolute());
  ASSERT_EQ(info.supported_versions_size(), 3);
  EXPECT_EQ(info.supported_versions(0), "v1.DRAPlugin");
  EXPECT_EQ(info.supported_versions(1), "v1beta1.DRAPlugin");
  // What k8s.io/dynamic-resource-allocation's helper advertises for the health service: the
  // generated service's full name.
  EXPECT_EQ(info.supported_versions(2), "v1alpha1.DRAResourceHealth");
  EXPECT_EQ(plugin_->registrations(), 1u);
  plugin_->stop();
  EXPECT_FALSE(fs::exists(plugin_->registration_socket())) << "removing it deregisters";
}

using polyaccel::testing::KubeletHealthWatch;
namespace dra_health = polyaccel::testing::dra_health;

PoolHealth all_healthy(const Pool& pool) {
  PoolHealth h;
  h.pool = pool.node;
  for (const auto& s : pool.slices)
    for (const auto& d : s.devices)
      if (d.kind != DeviceKind::nic && d.kind != DeviceKind::vf)
        h.devices[d.name] = {Health::healthy, {}};
  return h;
}

bool has(const KubeletHealthWatch::Message& m, const std::string& device,
         dra_health::HealthStatus health) {
  auto it = m.find(device);
  return it != m.end() && it->second.health == health;
}

TEST_F(Kubelet, HealthStreamSendsEveryDeviceAtOnceAndEachChange) {
  start_plugin([](DraPluginOptions& o) { o.health_resend = std::chrono::milliseconds(300); });
  PoolHealth health = all_healthy(pool_);
  ASSERT_TRUE(health.devices.count("gpu-0"));
  ASSERT_GT(health.devices.size(), 1u);
  plugin_->set_health(health);
  KubeletHealthWatch watch(plugin_->endpoint());
  using std::chrono::seconds;
  ASSERT_TRUE(watch.wait_message(
      [&](const KubeletHealthWatch::Message& m) {
        return m.size() == health.devices.size() && has(m, "gpu-0", dra_health::HEALTHY);
      },
      seconds(10)));
  {
    auto first = watch.messages().front();
    EXPECT_EQ(first.size(), health.devices.size()) << "the full state on connect";
    for (const auto& [name, d] : first) {
      EXPECT_EQ(d.pool, "node-1") << name;
      EXPECT_EQ(d.health, dra_health::HEALTHY) << name;
      EXPECT_GT(d.last_updated, 1'700'000'000) << "Unix seconds";
      EXPECT_EQ(d.timeout_s, 30) << "kubelet's default";
    }
    EXPECT_FALSE(first.count("nic-0")) << "a NIC's health is not watched: left to Unknown";
  }
  EXPECT_EQ(plugin_->health_streams(), 1u);

  // A change reaches the stream at once, with its reason.
  health.devices["gpu-0"] = {Health::unhealthy, "GPU 0000:19:00.0 is unhealthy: XID 79"};
  plugin_->set_health(health);
  ASSERT_TRUE(watch.wait_message(
      [&](const KubeletHealthWatch::Message& m) {
        return has(m, "gpu-0", dra_health::UNHEALTHY) &&
               m.at("gpu-0").message.find("XID 79") != std::string::npos;
      },
      seconds(5)));
  // Nothing changes: the state is sent again (kubelet takes 30 s of silence for Unknown).
  size_t before = watch.messages().size();
  ASSERT_TRUE(watch.wait_more_than(before, seconds(5)));
  // Back to healthy; a device that goes is sent as Unknown, not dropped.
  health.devices["gpu-0"] = {Health::healthy, {}};
  std::string gone = std::prev(health.devices.end())->first;
  health.devices.erase(gone);
  plugin_->set_health(health);
  ASSERT_TRUE(watch.wait_message(
      [&](const KubeletHealthWatch::Message& m) {
        return has(m, "gpu-0", dra_health::HEALTHY) && has(m, gone, dra_health::UNKNOWN) &&
               m.at(gone).message.find("not on this node") != std::string::npos;
      },
      seconds(5)))
      << gone;

  // Stopping the plugin ends the stream cleanly (kubelet sees EOF, not an error), promptly.
  auto t0 = std::chrono::steady_clock::now();
  plugin_->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, seconds(2));
  ASSERT_TRUE(watch.wait_ended(seconds(5)));
  EXPECT_TRUE(watch.status().ok()) << watch.status().error_message();
}

TEST_F(Kubelet, HealthStreamsAreBounded) {
  start_plugin([](DraPluginOptions& o) { o.max_health_streams = 2; });
  plugin_->set_health(all_healthy(pool_));
  using std::chrono::seconds;
  auto any = [](const KubeletHealthWatch::Message&) { return true; };
  KubeletHealthWatch a(plugin_->endpoint()), b(plugin_->endpoint());
  ASSERT_TRUE(a.wait_message(any, seconds(10)));
  ASSERT_TRUE(b.wait_message(any, seconds(10)));
  KubeletHealthWatch c(plugin_->endpoint());
  ASSERT_TRUE(c.wait_ended(seconds(10)));
  EXPECT_EQ(c.status().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(plugin_->health_streams(), 2u);
}

TEST_F(Kubelet, PrepareReturnsCdiIdsAndWritesTheClaimsSpec) {
  start_plugin();
  register_plugin();
  auto resp = prepare_v1({{"a", kUidA}});
  ASSERT_EQ(resp.claims().count(kUidA), 1u);
  const auto& c = resp.claims().at(kUidA);
  ASSERT_EQ(c.error(), "");
  ASSERT_EQ(c.devices_size(), 2) << "the other driver's device is not ours";
  EXPECT_EQ(c.devices(0).pool_name(), "node-1");
  EXPECT_EQ(c.devices(0).device_name(), "gpu-0");
  EXPECT_EQ(c.devices(0).request_names(0), "gpu");
  EXPECT_EQ(c.devices(0).cdi_device_ids(0), "polyaccel.io/claim=" + kUidA + "-gpu-0");
  EXPECT_EQ(c.devices(1).cdi_device_ids(0), "polyaccel.io/claim=" + kUidA + "-nic-2");
  fs::path spec = cdi_dir() / ("polyaccel.io-claim_" + kUidA + ".json");
  ASSERT_TRUE(fs::exists(spec));
  auto j = nlohmann::json::parse(std::ifstream(spec));
  EXPECT_EQ(j["kind"], "polyaccel.io/claim");
  EXPECT_EQ(j["devices"][0]["containerEdits"]["deviceNodes"][0]["path"], "/dev/nvidia0");
  EXPECT_EQ(j["devices"][1]["containerEdits"]["deviceNodes"][0]["path"], "/dev/infiniband/uverbs0");
  auto env = j["containerEdits"]["env"].get<std::vector<std::string>>();
  EXPECT_NE(std::find(env.begin(), env.end(), "NVIDIA_VISIBLE_DEVICES=0000:4e:00.0"), env.end());
  EXPECT_NE(std::find(env.begin(), env.end(), "NCCL_IB_HCA==mlx5_0"), env.end());
}

TEST_F(Kubelet, RepeatsAndBothVersionsGetTheSameAnswerWithoutPreparingTwice) {
  start_plugin();
  auto first = prepare_v1({{"a", kUidA}});
  auto again = prepare_v1({{"a", kUidA}});
  EXPECT_EQ(first.SerializeAsString(), again.SerializeAsString());
  auto stub = dial<v1beta1::DRAPlugin::Stub>();
  v1beta1::NodePrepareResourcesRequest req;
  auto* c = req.add_claims();
  c->set_namespace_("ns1");
  c->set_name("a");
  c->set_uid(kUidA);
  v1beta1::NodePrepareResourcesResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub->NodePrepareResources(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.claims().at(kUidA).devices(0).cdi_device_ids(0),
            first.claims().at(kUidA).devices(0).cdi_device_ids(0));
  EXPECT_EQ(lookups_.load(), 1) << "a prepared claim is answered from the checkpoint";
  // Claim b wants gpu-0 too: refused for that claim only, the call itself is OK.
  auto both = prepare_v1({{"b", kUidB}, {"a", kUidA}});
  EXPECT_NE(both.claims().at(kUidB).error().find("another claim"), std::string::npos);
  EXPECT_EQ(both.claims().at(kUidA).error(), "");
  // A claim the API server does not know, and a uid that is not one.
  auto unknown = prepare_v1({{"zzz", "1234"}, {"a", "../../etc"}});
  EXPECT_NE(unknown.claims().at("1234").error(), "");
  EXPECT_NE(unknown.claims().at("../../etc").error().find("not valid"), std::string::npos);
}

TEST_F(Kubelet, AgentRestartKeepsPreparedClaimsAndUnprepareIsIdempotent) {
  start_plugin();
  prepare_v1({{"a", kUidA}});
  plugin_->stop();
  plugin_.reset();
  start_plugin();  // a new process: the checkpoint is all it has
  ASSERT_EQ(plugin_->prepared().size(), 1u);
  // kubelet restarted too: it registers the plugin again and prepares the claim again.
  register_plugin();
  auto resp = prepare_v1({{"a", kUidA}});
  EXPECT_EQ(resp.claims().at(kUidA).devices_size(), 2);
  EXPECT_EQ(lookups_.load(), 1);
  auto b = prepare_v1({{"b", kUidB}});
  EXPECT_NE(b.claims().at(kUidB).error(), "") << "gpu-0 stays held across the restart";

  fs::path spec = cdi_dir() / ("polyaccel.io-claim_" + kUidA + ".json");
  ASSERT_TRUE(fs::exists(spec));
  auto u = unprepare_v1("a", kUidA);
  ASSERT_EQ(u.claims().count(kUidA), 1u);
  EXPECT_EQ(u.claims().at(kUidA).error(), "");
  EXPECT_FALSE(fs::exists(spec));
  EXPECT_TRUE(plugin_->prepared().empty());
  auto u2 = unprepare_v1("a", kUidA);
  EXPECT_EQ(u2.claims().at(kUidA).error(), "");
  // gpu-0 is free again.
  auto b2 = prepare_v1({{"b", kUidB}});
  EXPECT_EQ(b2.claims().at(kUidB).error(), "");
}

// A NIC published shared (--dra-nic-shares) that the scheduler gave to two claims, each a share
// of its own (shareID, as kube-scheduler writes a UUID): both are prepared, each with a CDI device
// named after its share and kubelet told the share; unprepare removes only that claim's share.
// A whole allocation of the NIC beside the shares, the same share twice, and a share of a device
// that is not shared are refused.
TEST_F(Kubelet, SharesOfASharedNicArePreparedSideBySide) {
  const std::string share_a = "11111111-2222-3333-4444-555555555555";
  const std::string share_b = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
  SliceOptions so;
  so.node = "node-1";
  so.nic_shares = 4;
  pool_ = *build_pool(model_, so);
  allocation_[kUidA] = {{"nic", kDriverName, "node-1", "nic-2", false, share_a}};
  allocation_[kUidB] = {{"nic", kDriverName, "node-1", "nic-2", false, share_b}};
  allocation_[kUidC] = {{"nic", kDriverName, "node-1", "nic-2"}};
  start_plugin();
  auto resp = prepare_v1({{"a", kUidA}, {"b", kUidB}});
  for (const auto& [uid, share] : {std::pair{kUidA, share_a}, std::pair{kUidB, share_b}}) {
    const auto& c = resp.claims().at(uid);
    ASSERT_EQ(c.error(), "") << uid;
    ASSERT_EQ(c.devices_size(), 1);
    EXPECT_EQ(c.devices(0).device_name(), "nic-2");
    EXPECT_EQ(c.devices(0).share_id(), share);
    ASSERT_EQ(c.devices(0).cdi_device_ids_size(), 1);
    EXPECT_EQ(c.devices(0).cdi_device_ids(0), "polyaccel.io/claim=" + uid + "-nic-2-" + share);
    auto j =
        nlohmann::json::parse(std::ifstream(cdi_dir() / ("polyaccel.io-claim_" + uid + ".json")));
    ASSERT_EQ(j["devices"].size(), 1u);
    EXPECT_EQ(j["devices"][0]["name"], uid + "-nic-2-" + share);
    EXPECT_EQ(j["devices"][0]["containerEdits"]["deviceNodes"][0]["path"],
              "/dev/infiniband/uverbs0");
  }
  auto whole = prepare_v1({{"c", kUidC}});
  EXPECT_NE(whole.claims().at(kUidC).error().find("another claim"), std::string::npos);
  allocation_[kUidC] = {{"nic", kDriverName, "node-1", "nic-2", false, share_a}};
  auto twice = prepare_v1({{"c", kUidC}});
  EXPECT_NE(twice.claims().at(kUidC).error().find("another claim"), std::string::npos)
      << "share " << share_a << " is claim a's";
  allocation_[kUidC] = {{"gpu", kDriverName, "node-1", "gpu-1", false, share_b}};
  auto unshared = prepare_v1({{"c", kUidC}});
  EXPECT_NE(unshared.claims().at(kUidC).error().find("not published as shared"), std::string::npos)
      << unshared.claims().at(kUidC).error();

  // The shares survive a restart (the checkpoint), and unprepare takes one share only.
  plugin_->stop();
  plugin_.reset();
  start_plugin();
  ASSERT_EQ(plugin_->prepared().size(), 2u);
  EXPECT_EQ(unprepare_v1("a", kUidA).claims().at(kUidA).error(), "");
  EXPECT_FALSE(fs::exists(cdi_dir() / ("polyaccel.io-claim_" + kUidA + ".json")));
  EXPECT_TRUE(fs::exists(cdi_dir() / ("polyaccel.io-claim_" + kUidB + ".json")));
  ASSERT_EQ(plugin_->prepared().size(), 1u);
  EXPECT_EQ(plugin_->prepared()[0].devices[0].share_id, share_b);
  auto again = prepare_v1({{"b", kUidB}});
  EXPECT_EQ(again.claims().at(kUidB).devices(0).share_id(), share_b);
}

// The claim as the API server gives it: a shareID goes into CDI names and must be a UID.
TEST(DraClaims, AShareIdThatIsNotAUidIsRefused) {
  auto claim = [](const std::string& share) {
    auto j = nlohmann::json::parse(R"({"kind": "ResourceClaim", "metadata": {"name": "a"},
        "status": {"allocation": {"devices": {"results": [{"request": "nic",
        "driver": "polyaccel.io", "pool": "node-1", "device": "nic-2"}]}}}})");
    j["status"]["allocation"]["devices"]["results"][0]["shareID"] = share;
    return j;
  };
  auto ok = parse_claim(claim("11111111-2222-3333-4444-555555555555"));
  ASSERT_TRUE(ok) << ok.error().message();
  EXPECT_EQ(ok->devices.at(0).share_id, "11111111-2222-3333-4444-555555555555");
  for (const std::string& bad :
       {std::string("../../x"), std::string("a=b"), std::string(), std::string(65, 'a')}) {
    auto r = parse_claim(claim(bad));
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::bad_input);
    EXPECT_NE(r.error().message().find("shareID"), std::string::npos) << r.error().message();
  }
}

// A claim with CPU and memory devices (--dra-cpus core --dra-memory): its CPUs and memory nodes
// are recorded with it and read back from the checkpoint after an agent restart; a core that one
// claim holds is refused to another.
TEST_F(Kubelet, AClaimsCpusAndMemoryNodesAreRecordedAndReadBackAfterARestart) {
  SliceOptions so;
  so.node = "node-1";
  so.cpu.grain = CpuGrain::core;
  so.cpu.memory = true;
  pool_ = *build_pool(model_, so);
  allocation_[kUidA] = {{"gpu", kDriverName, "node-1", "gpu-0"},
                        {"cpus", kDriverName, "node-1", "cpu-2"},
                        {"cpus", kDriverName, "node-1", "cpu-3"},
                        {"memory", kDriverName, "node-1", "memory-numa-0"}};
  allocation_[kUidB] = {{"cpus", kDriverName, "node-1", "cpu-3"}};
  start_plugin();
  auto resp = prepare_v1({{"a", kUidA}});
  ASSERT_EQ(resp.claims().at(kUidA).error(), "");
  ASSERT_EQ(resp.claims().at(kUidA).devices_size(), 4);
  CpuSet want = pool_.device("cpu-2")->cpus | pool_.device("cpu-3")->cpus;
  const std::string plugin_dir = polyaccel::testing::dra_plugin_options(dir_.path()).plugin_dir;
  for (int restart = 0; restart < 2; ++restart) {
    auto read = read_prepared_claims(plugin_dir);
    ASSERT_TRUE(read) << read.error().message();
    ASSERT_EQ(read->size(), 1u);
    EXPECT_EQ(read->front().name, "a");
    EXPECT_EQ(read->front().cpus, want);
    EXPECT_EQ(read->front().mems, CpuSet({0}));
    EXPECT_EQ(read->front().memory_bytes, model_.numa_node(0)->memory_bytes);
    plugin_->stop();
    plugin_.reset();
    start_plugin();
    ASSERT_EQ(plugin_->prepared().size(), 1u);
    EXPECT_EQ(plugin_->prepared().front().cpus, want);
  }
  auto b = prepare_v1({{"b", kUidB}});
  EXPECT_NE(b.claims().at(kUidB).error().find("another claim"), std::string::npos);
  // The spec of the claim names the CPUs on each CPU and memory device (the NRI plugin's env).
  auto j =
      nlohmann::json::parse(std::ifstream(cdi_dir() / ("polyaccel.io-claim_" + kUidA + ".json")));
  EXPECT_EQ(j["devices"][1]["containerEdits"]["env"][0],
            "POLYACCEL_CPUS_" + kUidA + "=" + want.to_list());
  EXPECT_EQ(j["devices"][3]["containerEdits"]["env"][1], "POLYACCEL_MEMS_" + kUidA + "=0");
  ASSERT_EQ(unprepare_v1("a", kUidA).claims().at(kUidA).error(), "");
  auto read = read_prepared_claims(plugin_dir);
  ASSERT_TRUE(read);
  EXPECT_TRUE(read->empty());
  EXPECT_EQ(prepare_v1({{"b", kUidB}}).claims().at(kUidB).error(), "");
}

TEST_F(Kubelet, ACheckpointThatIsNotOneStopsTheStart) {
  write_text(dir_.path() / "plugins/polyaccel.io/checkpoint.json", "{\"version\": 9}");
  DraPluginOptions o;
  o.plugin_dir = (dir_.path() / "plugins/polyaccel.io").string();
  o.registry_dir = (dir_.path() / "plugins_registry").string();
  o.cdi_dir = cdi_dir().string();
  DraPlugin p(o);
  Status st = p.start(model_, pool_, read_cdi_host(model_, root().string()));
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::bad_input);
  EXPECT_FALSE(fs::exists(p.registration_socket()));
}

}  // namespace
}  // namespace polyaccel::dra
