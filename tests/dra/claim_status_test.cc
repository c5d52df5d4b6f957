// A prepared NIC's claim status (claim_status.h, issue 43 item 6): the kubelet plugin writes
// status.devices with the interface, its MAC and a Ready condition through the real client to a
// test API server that authorizes and validates the write as kube-apiserver 1.34 to 1.37 do,
// with the DRA overlay's own RBAC; other drivers' entries stay; a refusal never fails the
// prepare and is said once.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dra/claim_status.h"
#include "dra/dra_fixture.h"
#include "dra/dra_rbac.h"
#include "dra/fake_api_server.h"
#include "dra/plugin.h"

namespace polyaccel::dra {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using polyaccel::testing::FakeApiServer;
using polyaccel::testing::kUidA;
using polyaccel::testing::TempDir;
using polyaccel::testing::write_text;
using ::testing::HasSubstr;

constexpr const char* kMac = "b8:ce:f6:0a:0b:0c";

class ClaimStatus : public ::testing::Test {
 protected:
  ClaimStatus() : server_(dir_.path()) {
    model_ = polyaccel::testing::load_fixture(polyaccel::testing::kXe8640);
    polyaccel::testing::write_nvidia_minors(root(),
                                            polyaccel::testing::accelerator_bus_ids(model_));
    polyaccel::testing::write_uverbs(root(), 4);
    SliceOptions so;
    so.node = "node-1";
    pool_ = *build_pool(model_, so);
    const Device* nic = pool_.device("nic-2");
    EXPECT_TRUE(nic);
    netdev_ = model_.nics.at(nic->nic).netdevs.at(0);
    rdma_ = model_.nics.at(nic->nic).rdma_devices.at(0);
    write_text(root() / "sys/class/net" / netdev_ / "address", std::string(kMac) + "\n");
    kube_api::KubeConfig c;
    c.server = server_.url();
    c.token = "test-token";
    c.timeout = std::chrono::milliseconds(3000);
    client_ = std::make_unique<kube_api::KubeClient>(c);
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.claim_rbac = granted_to_agent_lines();  // the DRA overlay's own RBAC
  }
  ~ClaimStatus() override {
    if (plugin_) plugin_->stop();
    std::lock_guard<std::mutex> lock(server_.mu);
    EXPECT_TRUE(server_.schema_errors.empty()) << server_.schema_errors.front();
  }
  fs::path root() const { return dir_.path() / "root"; }

  // Claim ns1/train: nic-2 and gpu-0 of our driver, a GPU of another driver, allocated to
  // `node`; the other driver's status entry is there already.
  void add_claim(const std::string& node, const std::string& share_id = "") {
    json nic = {
        {"request", "nic"}, {"driver", "polyaccel.io"}, {"pool", "node-1"}, {"device", "nic-2"}};
    if (!share_id.empty()) nic["shareID"] = share_id;
    json claim = {
        {"apiVersion", "resource.k8s.io/v1"},
        {"kind", "ResourceClaim"},
        {"metadata",
         {{"name", "train"}, {"namespace", "ns1"}, {"uid", kUidA}, {"resourceVersion", "40"}}},
        {"spec",
         {{"devices",
           {{"requests",
             {{{"name", "nic"}, {"exactly", {{"deviceClassName", "rdma-nic.polyaccel.io"}}}},
              {{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu.polyaccel.io"}}}},
              {{"name", "x"}, {"exactly", {{"deviceClassName", "gpu.nvidia.com"}}}}}}}}}},
        {"status",
         {{"allocation",
           {{"devices",
             {{"results",
               {nic,
                {{"request", "gpu"},
                 {"driver", "polyaccel.io"},
                 {"pool", "node-1"},
                 {"device", "gpu-0"}},
                {{"request", "x"},
                 {"driver", "gpu.nvidia.com"},
                 {"pool", "node-1"},
                 {"device", "gpu-1"}}}}}},
            {"nodeSelector",
             {{"nodeSelectorTerms",
               {{{"matchFields",
                  {{{"key", "metadata.name"}, {"operator", "In"}, {"values", {node}}}}}}}}}}}},
          {"devices", {other_entry()}}}}};
    auto errors =
        polyaccel::testing::K8sSchema({"v1.36/resource.k8s.io-v1-openapi.json"})
            .validate(claim, "io.k8s.api.resource.v1.ResourceClaim");  // 1.34.9's has no shareID
    EXPECT_TRUE(errors.empty()) << errors.front();
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.claims["ns1/train"] = claim;
  }
  static json other_entry() {
    return {{"driver", "gpu.nvidia.com"},
            {"pool", "node-1"},
            {"device", "gpu-1"},
            {"data", {{"note", "another driver's"}}}};
  }
  json stored_claim() {
    std::lock_guard<std::mutex> lock(server_.mu);
    return server_.claims.at("ns1/train");
  }

  void start_plugin() {
    DraPluginOptions o = polyaccel::testing::dra_plugin_options(dir_.path());
    o.root = root().string();
    o.lookup = api_claim_lookup(*client_);
    o.write_status = [this](const ClaimRef& c, const std::vector<json>& e) {
      return write_claim_device_status(*client_, c.ns, c.name, c.uid, kDriverName, e);
    };
    o.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(log_mu_);
      log_.push_back(line);
    };
    plugin_ = std::make_unique<DraPlugin>(o);
    Status st = plugin_->start(model_, pool_, read_cdi_host(model_, root().string()));
    ASSERT_TRUE(st) << st.error().message();
  }
  PrepareOutcome prepare() { return plugin_->prepare({{"ns1", kUidA, "train"}}).at(kUidA); }
  std::vector<std::string> log() {
    std::lock_guard<std::mutex> lock(log_mu_);
    return log_;
  }

  TempDir dir_;
  FakeApiServer server_;
  std::unique_ptr<kube_api::KubeClient> client_;
  HostModel model_;
  Pool pool_;
  std::string netdev_, rdma_;
  std::unique_ptr<DraPlugin> plugin_;
  std::mutex log_mu_;
  std::vector<std::string> log_;
};

// On 1.36 with the overlay's RBAC: the NIC's entry (interface, MAC, Ready, the RDMA device) is
// written beside the other driver's, which stays as it was; the GPU gets none; the synthetic
// check was associated-node, and a repeated prepare writes nothing more.
TEST_F(ClaimStatus, APreparedNicIsInTheClaimStatusBesideOtherDriversEntries) {
  add_claim("node-1");
  start_plugin();
  auto out = prepare();
  ASSERT_EQ(out.error, "");
  ASSERT_EQ(out.devices.size(), 2u);
  json claim = stored_claim();
  const json& devices = claim["status"]["devices"];
  ASSERT_EQ(devices.size(), 2u) << devices.dump(1);
  EXPECT_EQ(devices[0], other_entry());
  const json& nic = devices[1];
  EXPECT_EQ(nic["driver"], "polyaccel.io");
  EXPECT_EQ(nic["pool"], "node-1");
  EXPECT_EQ(nic["device"], "nic-2");
  EXPECT_FALSE(nic.contains("shareID"));
  EXPECT_EQ(nic["networkData"]["interfaceName"], netdev_);
  EXPECT_EQ(nic["networkData"]["hardwareAddress"], kMac);
  EXPECT_FALSE(nic["networkData"].contains("ips")) << "the test's interface is not in this netns";
  ASSERT_EQ(nic["conditions"].size(), 1u);
  EXPECT_EQ(nic["conditions"][0]["type"], "Ready");
  EXPECT_EQ(nic["conditions"][0]["status"], "True");
  EXPECT_EQ(nic["conditions"][0]["reason"], "Prepared");
  EXPECT_THAT(nic["conditions"][0]["message"].get<std::string>(), HasSubstr(rdma_));
  EXPECT_EQ(nic["data"]["rdmaDevices"][0], rdma_);
  EXPECT_EQ(nic["data"]["pciBusID"],
            model_.nics[pool_.device("nic-2")->nic].pci.address.to_string());
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    EXPECT_THAT(server_.authorized,
                ::testing::Contains("resource.k8s.io resourceclaims/driver[polyaccel.io] "
                                    "associated-node:update -> allow"));
    EXPECT_TRUE(server_.claim_refusals.empty()) << server_.claim_refusals.front();
  }
  EXPECT_TRUE(log().empty()) << log().front();
  // The same entries again (a rewrite after the status was written) change nothing on the server.
  const std::string rv = claim["metadata"]["resourceVersion"];
  auto again = nic_device_statuses(
      model_, pool_, {{"nic-2", ""}}, "2027-01-01T00:00:00Z",
      [this](const std::string& n) { return read_netdev_addresses(root().string(), n); });
  ASSERT_TRUE(write_claim_device_status(*client_, "ns1", "train", kUidA, kDriverName, again));
  EXPECT_EQ(stored_claim()["metadata"]["resourceVersion"], rv);
}

// A share of a shared NIC (--dra-nic-shares) is named by its shareID, as the allocation has it.
TEST_F(ClaimStatus, AShareIsNamedByItsShareId) {
  SliceOptions so;
  so.node = "node-1";
  so.nic_shares = 4;
  pool_ = *build_pool(model_, so);
  const std::string share = "5c6d7e8f-1234-5678-9abc-def012345678";
  add_claim("node-1", share);
  start_plugin();
  ASSERT_EQ(prepare().error, "");
  const json devices = stored_claim()["status"]["devices"];
  ASSERT_EQ(devices.size(), 2u) << devices.dump(1);
  EXPECT_EQ(devices[1]["shareID"], share);
  EXPECT_THAT(devices[1]["conditions"][0]["message"].get<std::string>(),
              HasSubstr("shared with other claims"));
}

// The refusals of each version: without the synthetic grant 1.36 refuses (403, the real
// message), the prepare still succeeds and the problem is said once, with the rule to add; 1.35
// has no such check; a claim allocated to another node is never the agent's to write
// (associated-node is not even asked, arbitrary-node is not granted).
TEST_F(ClaimStatus, RefusalsNeverFailThePrepareAndNameTheRule) {
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.claim_rbac->erase(
        "resource.k8s.io resourceclaims/driver[polyaccel.io] associated-node:update");
  }
  add_claim("node-1");
  start_plugin();
  auto out = prepare();
  EXPECT_EQ(out.error, "");
  EXPECT_EQ(out.devices.size(), 2u);
  EXPECT_EQ(stored_claim()["status"]["devices"].size(), 1u) << "nothing written";
  auto lines = log();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("claim ns1/train: device status not written"));
  EXPECT_THAT(lines[0], HasSubstr("changing status.devices requires extra permission"));
  EXPECT_THAT(lines[0], HasSubstr("resourceclaims/driver associated-node:update"));
  // The same refusal again is not said again.
  (void)plugin_->unprepare({{"ns1", kUidA, "train"}});
  EXPECT_EQ(prepare().error, "");
  EXPECT_EQ(log().size(), 1u);

  // 1.35: resourceclaims/status update is all it takes.
  (void)plugin_->unprepare({{"ns1", kUidA, "train"}});
  server_.play(35);
  EXPECT_EQ(prepare().error, "");
  EXPECT_EQ(stored_claim()["status"]["devices"].size(), 2u);

  // 1.36 again, the grant back, a claim allocated to node-2: arbitrary-node only, refused.
  (void)plugin_->unprepare({{"ns1", kUidA, "train"}});
  server_.play(36);
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.claim_rbac = granted_to_agent_lines();
    server_.authorized.clear();
  }
  add_claim("node-2");
  EXPECT_EQ(prepare().error, "");
  EXPECT_EQ(stored_claim()["status"]["devices"].size(), 1u);
  std::lock_guard<std::mutex> lock(server_.mu);
  EXPECT_EQ(server_.authorized,
            (std::vector<std::string>{
                "resource.k8s.io resourceclaims/status update -> allow",
                "resource.k8s.io resourceclaims/driver[polyaccel.io] arbitrary-node:update -> "
                "deny"}));
}

// What the server validates, and the merge keeps: an entry for a device the claim was not
// allocated is refused (422, the real message); other entries keep their order; ours replace
// ours.
TEST_F(ClaimStatus, TheServerRefusesADeviceNotAllocatedAndTheMergeKeepsOthers) {
  add_claim("node-1");
  json stray = {{"driver", "polyaccel.io"}, {"pool", "node-1"}, {"device", "nic-3"}};
  Status st = write_claim_device_status(*client_, "ns1", "train", kUidA, kDriverName, {stray});
  ASSERT_FALSE(st);
  EXPECT_THAT(st.error().message(), HasSubstr("must be an allocated device in the claim"));
  // A claim deleted and made again under the same name is not written.
  Status other =
      write_claim_device_status(*client_, "ns1", "train", "another-uid", kDriverName, {stray});
  ASSERT_FALSE(other);
  EXPECT_THAT(other.error().message(), HasSubstr("is not the one prepared"));

  json ours_old = {
      {"driver", "polyaccel.io"}, {"pool", "node-1"}, {"device", "nic-2"}, {"data", {{"v", 1}}}};
  json ours_gpu = {{"driver", "polyaccel.io"}, {"pool", "node-1"}, {"device", "gpu-0"}};
  json ours_new = {
      {"driver", "polyaccel.io"}, {"pool", "node-1"}, {"device", "nic-2"}, {"data", {{"v", 2}}}};
  json merged = merge_device_statuses(json::array({ours_old, other_entry(), ours_gpu}), kDriverName,
                                      {ours_new});
  EXPECT_EQ(merged, json::array({other_entry(), ours_gpu, ours_new}));
  EXPECT_EQ(merge_device_statuses(nullptr, kDriverName, {ours_new}), json::array({ours_new}));
}

// The live host's loopback: the agent in the host's namespace gives the addresses (CIDR) with
// the MAC; a root whose MAC for the same name differs (another namespace's interface) gives none.
TEST(NetdevAddresses, TheHostsOwnInterfaceHasItsAddressesAndAStrangerNone) {
  auto lo = read_netdev_addresses("/", "lo");
  if (lo.hardware_address.empty()) GTEST_SKIP() << "no /sys/class/net/lo/address here";
  EXPECT_EQ(lo.hardware_address, "00:00:00:00:00:00");
  EXPECT_THAT(lo.ips, ::testing::Contains("127.0.0.1/8"));
  TempDir d;
  write_text(d.path() / "sys/class/net/lo/address", std::string(kMac) + "\n");
  auto stranger = read_netdev_addresses(d.path().string(), "lo");
  EXPECT_EQ(stranger.hardware_address, kMac);
  EXPECT_TRUE(stranger.ips.empty());
  for (const char* bad : {"", "..", "a/b", "averyveryverylongname"})
    EXPECT_TRUE(read_netdev_addresses("/", bad).hardware_address.empty()) << bad;
  write_text(d.path() / "sys/class/net/eth9/address", "not a mac\n");
  EXPECT_TRUE(read_netdev_addresses(d.path().string(), "eth9").hardware_address.empty());
}

}  // namespace
}  // namespace polyaccel::dra
