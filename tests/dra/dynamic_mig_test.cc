// Dynamic MIG in the DRA plugin: the pool publishes every placement (MigDevices::all) and a claim
// for one that has no instance yet makes it at prepare (GPU instance and compute instance,
// through MigControl on the MIG-capable test NVML, the path of `polyaccel mig apply`), records it
// in the checkpoint and destroys it at unprepare, after a restart too. A placement that an
// instance holds is refused with that instance's name; instances that existed before are never
// destroyed.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <fstream>

#include "core/file_io.h"
#include "dra/dra_fixture.h"
#include "dra/plugin.h"
#include "kube/proto/dra_v1.grpc.pb.h"

namespace polyaccel::dra {
namespace {

namespace fs = std::filesystem;
namespace v1 = k8s::io::kubelet::pkg::apis::dra::v1;
using polyaccel::testing::kUidA;
using polyaccel::testing::kUidB;
using polyaccel::testing::kUidC;
using polyaccel::testing::TempDir;
using ::testing::HasSubstr;

// hgx-8xh200-mig.json: 5d:00.0 has MIG on and no instance; 18:00.0 holds 7 x 1g.18gb.
using polyaccel::testing::kEmptyGpu;
const std::string kFullGpu = "0000:18:00.0";

class DynamicMig : public ::testing::Test {
 protected:
  DynamicMig() {
    polyaccel::testing::use_nvml_scenario("hgx-8xh200-mig.json");
    ::setenv("POLYACCEL_LOCK_DIR", dir_.path().c_str(), 1);  // `mig apply`'s lock
    // The control first: it keeps the library initialised (its MIG state) for the whole test.
    auto c = open_nvml_mig_control();
    EXPECT_TRUE(c) << c.error().message();
    if (c) control_ = std::shared_ptr<MigControl>(std::move(*c));
    {
      auto backends = make_all_backends();
      merge_accelerators(model_, backends);
    }
    // /proc of the nvidia driver: minor i for the i-th GPU, and capability minors for every
    // GPU instance id the library may hand out.
    polyaccel::testing::write_nvidia_minors(root(),
                                            polyaccel::testing::accelerator_bus_ids(model_));
    std::string caps;
    for (size_t i = 0; i < model_.accelerators.size(); ++i) {
      for (unsigned gi = 1; gi <= 14; ++gi) {
        std::string g = "gpu" + std::to_string(i) + "/gi" + std::to_string(gi);
        caps += g + "/access " + std::to_string(100 * i + 2 * gi) + "\n" + g + "/ci0/access " +
                std::to_string(100 * i + 2 * gi + 1) + "\n";
      }
    }
    polyaccel::testing::write_mig_minors(root(), caps);
    SliceOptions so;
    so.node = "node-1";
    so.mig = MigDevices::all;
    pool_ = *build_pool(model_, so);
  }
  ~DynamicMig() override {
    if (plugin_) plugin_->stop();
  }

  fs::path root() const { return dir_.path() / "root"; }
  fs::path cdi_dir() const { return dir_.path() / "cdi"; }

  // The pool's device of `profile` at `start` on the GPU at `bdf`.
  std::string device(const std::string& bdf, const std::string& profile, unsigned start) {
    for (const auto& s : pool_.slices)
      for (const auto& d : s.devices)
        if (d.kind == DeviceKind::mig && d.mig_profile == profile && d.mig_start == start &&
            model_.accelerators[d.accelerator].pci.address.to_string() == bdf)
          return d.name;
    ADD_FAILURE() << "no " << profile << " at " << start << " on " << bdf;
    return "";
  }

  std::vector<MigPlacedInstance> instances(const std::string& bdf) {
    auto gpus = control_->gpus();
    EXPECT_TRUE(gpus);
    for (const auto& g : *gpus)
      if (g.pci_bus_id == bdf) return g.instances;
    ADD_FAILURE() << bdf;
    return {};
  }

  void start_plugin(bool with_control = true) {
    DraPluginOptions o = polyaccel::testing::dra_plugin_options(dir_.path());
    o.log = [this](const std::string& line) { log_ += line + "\n"; };
    o.lookup = [this](const std::string& ns, const std::string& name) -> Result<ClaimInfo> {
      auto it = claims_.find(name);
      if (ns != "ns1" || it == claims_.end())
        return Error{ErrorCode::not_found, name, "no such claim", {}};
      return it->second;
    };
    if (with_control) o.mig = control_;
    plugin_ = std::make_unique<DraPlugin>(o);
    // As a new agent would: the model and pool of that time (without instances made since).
    Status st = plugin_->start(model_, pool_, read_cdi_host(model_, root().string()));
    ASSERT_TRUE(st) << st.error().message();
  }

  void claim(const std::string& name, const std::string& uid, const std::string& device) {
    claims_[name] = ClaimInfo{uid, {{"mig", kDriverName, "node-1", device}}};
  }

  v1::NodePrepareResourcesResponse prepare(const std::string& name, const std::string& uid) {
    auto stub = v1::DRAPlugin::NewStub(
        grpc::CreateChannel("unix:" + plugin_->endpoint(), grpc::InsecureChannelCredentials()));
    v1::NodePrepareResourcesRequest req;
    auto* c = req.add_claims();
    c->set_namespace_("ns1");
    c->set_name(name);
    c->set_uid(uid);
    v1::NodePrepareResourcesResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(45));
    EXPECT_TRUE(stub->NodePrepareResources(&ctx, req, &resp).ok());
    return resp;
  }

  std::string unprepare(const std::string& name, const std::string& uid) {
    auto stub = v1::DRAPlugin::NewStub(
        grpc::CreateChannel("unix:" + plugin_->endpoint(), grpc::InsecureChannelCredentials()));
    v1::NodeUnprepareResourcesRequest req;
    auto* c = req.add_claims();
    c->set_namespace_("ns1");
    c->set_name(name);
    c->set_uid(uid);
    v1::NodeUnprepareResourcesResponse resp;
    grpc::ClientContext ctx;
    EXPECT_TRUE(stub->NodeUnprepareResources(&ctx, req, &resp).ok());
    return resp.claims().at(uid).error();
  }

  TempDir dir_;
  std::shared_ptr<MigControl> control_;
  HostModel model_;
  Pool pool_;
  std::map<std::string, ClaimInfo> claims_;
  std::unique_ptr<DraPlugin> plugin_;
  std::string log_;
};

TEST_F(DynamicMig, PrepareCreatesTheInstanceAndUnprepareDestroysItAfterARestart) {
  ASSERT_TRUE(control_);
  ASSERT_TRUE(instances(kEmptyGpu).empty());
  const std::string big = device(kEmptyGpu, "3g.71gb", 4);
  const std::string small = device(kEmptyGpu, "1g.18gb", 5);  // inside the 3g.71gb's slices 4-7
  start_plugin();
  claim("a", kUidA, big);
  auto resp = prepare("a", kUidA);
  const auto& c = resp.claims().at(kUidA);
  ASSERT_EQ(c.error(), "") << log_;
  ASSERT_EQ(c.devices_size(), 1);
  EXPECT_EQ(c.devices(0).device_name(), big);
  EXPECT_EQ(c.devices(0).cdi_device_ids(0), "polyaccel.io/claim=" + kUidA + "-" + big);
  // The instance exists now, where the device said.
  auto made = instances(kEmptyGpu);
  ASSERT_EQ(made.size(), 1u);
  EXPECT_EQ(made[0].profile, "3g.71gb");
  EXPECT_EQ(made[0].start, 4u);
  ASSERT_TRUE(made[0].has_compute_instance);
  ASSERT_FALSE(made[0].uuid.empty());
  EXPECT_THAT(log_, HasSubstr("created MIG 3g.71gb at memory slice 4 of GPU " + kEmptyGpu));
  // Its CDI spec: the GPU's node and the new instance's capability nodes, and its UUID.
  size_t minor = 0;
  while (model_.accelerators[minor].pci.address.to_string() != kEmptyGpu)
    ++minor;
  auto spec =
      nlohmann::json::parse(std::ifstream(cdi_dir() / ("polyaccel.io-claim_" + kUidA + ".json")));
  std::vector<std::string> nodes;
  for (const auto& n : spec["devices"][0]["containerEdits"]["deviceNodes"])
    nodes.push_back(n["path"]);
  unsigned gi = made[0].gpu_instance_id;
  EXPECT_THAT(nodes, ::testing::ElementsAre(
                         "/dev/nvidia" + std::to_string(minor),
                         "/dev/nvidia-caps/nvidia-cap" + std::to_string(100 * minor + 2 * gi),
                         "/dev/nvidia-caps/nvidia-cap" + std::to_string(100 * minor + 2 * gi + 1)));
  EXPECT_THAT(spec["containerEdits"]["env"].get<std::vector<std::string>>(),
              ::testing::Contains("NVIDIA_VISIBLE_DEVICES=" + made[0].uuid));
  auto checkpoint = read_text_file(dir_.path() / "plugins/polyaccel.io/checkpoint.json");
  ASSERT_TRUE(checkpoint);
  EXPECT_THAT(*checkpoint, HasSubstr("\"gpuInstance\": " + std::to_string(gi)));
  EXPECT_THAT(*checkpoint, HasSubstr(made[0].uuid));

  // A claim for a placement the new instance covers: refused by name, nothing made.
  claim("b", kUidB, small);
  auto taken = prepare("b", kUidB);
  EXPECT_THAT(taken.claims().at(kUidB).error(),
              HasSubstr("MIG 1g.18gb at memory slice 5 of GPU " + kEmptyGpu +
                        " is taken by MIG 3g.71gb (GPU instance " + std::to_string(gi) +
                        ") at memory slice 4"));
  EXPECT_EQ(instances(kEmptyGpu).size(), 1u);

  // A new agent with the pool of its start: the checkpoint says the instance is the claim's;
  // a repeat answers the same, and unprepare destroys it.
  plugin_->stop();
  plugin_.reset();
  start_plugin();
  fs::remove(cdi_dir() / ("polyaccel.io-claim_" + kUidA + ".json"));
  auto again = prepare("a", kUidA);
  EXPECT_EQ(again.SerializeAsString(), resp.SerializeAsString());
  EXPECT_TRUE(fs::exists(cdi_dir() / ("polyaccel.io-claim_" + kUidA + ".json")))
      << "written back from the checkpoint";
  EXPECT_EQ(instances(kEmptyGpu).size(), 1u) << "not made twice";
  EXPECT_EQ(unprepare("a", kUidA), "") << log_;
  EXPECT_TRUE(instances(kEmptyGpu).empty());
  EXPECT_FALSE(fs::exists(cdi_dir() / ("polyaccel.io-claim_" + kUidA + ".json")));
  EXPECT_EQ(unprepare("a", kUidA), "") << "idempotent";

  // Free again: the small one fits now, and goes at its unprepare too.
  auto b = prepare("b", kUidB);
  ASSERT_EQ(b.claims().at(kUidB).error(), "") << log_;
  ASSERT_EQ(instances(kEmptyGpu).size(), 1u);
  EXPECT_EQ(instances(kEmptyGpu)[0].start, 5u);
  EXPECT_EQ(unprepare("b", kUidB), "");
  EXPECT_TRUE(instances(kEmptyGpu).empty());
}

TEST_F(DynamicMig, ExistingInstancesStayAndNoControlIsAClearRefusal) {
  ASSERT_TRUE(control_);
  // An instance that existed before the claim is used as it is and never destroyed.
  const std::string existing = device(kFullGpu, "1g.18gb", 0);
  start_plugin();
  claim("c", kUidC, existing);
  auto c = prepare("c", kUidC);
  ASSERT_EQ(c.claims().at(kUidC).error(), "") << log_;
  EXPECT_EQ(instances(kFullGpu).size(), 7u);
  EXPECT_EQ(unprepare("c", kUidC), "");
  EXPECT_EQ(instances(kFullGpu).size(), 7u);
  auto checkpoint = read_text_file(dir_.path() / "plugins/polyaccel.io/checkpoint.json");
  ASSERT_TRUE(checkpoint);
  EXPECT_THAT(*checkpoint, ::testing::Not(HasSubstr("gpuInstance")));
  // A placement on the full GPU that overlaps its instances: refused.
  claim("b", kUidB, device(kFullGpu, "2g.35gb", 2));
  EXPECT_THAT(prepare("b", kUidB).claims().at(kUidB).error(), HasSubstr("is taken by MIG 1g.18gb"));

  // Without MIG control, a device with no instance cannot be given.
  plugin_->stop();
  plugin_.reset();
  start_plugin(false);
  claim("a", kUidA, device(kEmptyGpu, "7g.141gb", 0));
  EXPECT_THAT(prepare("a", kUidA).claims().at(kUidA).error(),
              HasSubstr("no MIG instance exists at this placement"));
  EXPECT_TRUE(instances(kEmptyGpu).empty());
}

TEST_F(DynamicMig, AMigApplyHoldingItsLockDefersThePrepare) {
  ASSERT_TRUE(control_);
  start_plugin();
  claim("a", kUidA, device(kEmptyGpu, "2g.35gb", 2));
  int fd = ::open((dir_.path() / "polyaccel-mig.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  EXPECT_THAT(prepare("a", kUidA).claims().at(kUidA).error(),
              HasSubstr("a polyaccel mig apply is running"));
  EXPECT_TRUE(instances(kEmptyGpu).empty());
  ::close(fd);  // the apply is done: kubelet's retry goes through
  EXPECT_EQ(prepare("a", kUidA).claims().at(kUidA).error(), "") << log_;
  EXPECT_EQ(instances(kEmptyGpu).size(), 1u);
  EXPECT_EQ(unprepare("a", kUidA), "");
  EXPECT_TRUE(instances(kEmptyGpu).empty());
}

}  // namespace
}  // namespace polyaccel::dra
