// Dynamic MIG in the DRA plugin: the pool publishes every placement (MigDevices::all) and a claim
// for one that has no instance yet makes it at prepare (GPU instance and compute instance,
// through MigControl on the MIG-capable test NVML, the path of `polyaccel mig apply`), records it
// in the checkpoint and destroys it at unprepare, after a restart too. A placement that an
// instance holds is refused with that instance's name; instances that existed before are never
// destroyed. Instances that exist (made by `mig apply`, or by prepare for a claim before the agent
// restarted) are devices of their own and hold their memory and compute slices: a scheduler that
// allocates as the real one does over the published counters never gets a placement that prepare
// refuses, however many claims fill the node.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <fstream>

#include "core/file_io.h"
#include "dra/dra_fixture.h"
#include "dra/kubelet_dra_client.h"
#include "dra/plugin.h"
#include "dra/structured_allocator.h"
#include "kube/proto/dra_v1.grpc.pb.h"
#include "share/mig_profiles.h"

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

  // What a new agent (or a rescan) sees now: the model with the instances that exist, its pool.
  void rescan() {
    model_ = HostModel{};
    auto backends = make_all_backends();
    merge_accelerators(model_, backends);
    SliceOptions so;
    so.node = "node-1";
    so.mig = MigDevices::all;
    auto p = build_pool(model_, so);
    ASSERT_TRUE(p) << p.error().message();
    pool_ = *p;
  }

  // The pool's slices as the API server stores them, at generation `generation`.
  std::vector<nlohmann::json> stored_slices(std::int64_t generation) const {
    std::vector<nlohmann::json> out;
    for (size_t i = 0; i < pool_.slices.size(); ++i)
      out.push_back(slice_json(pool_, i, generation));
    return out;
  }

  unsigned gpu_index(const std::string& bdf) {
    auto gpus = control_->gpus();
    EXPECT_TRUE(gpus);
    for (const auto& g : *gpus)
      if (g.pci_bus_id == bdf) return g.index;
    ADD_FAILURE() << bdf;
    return 0;
  }

  void claim(const std::string& name, const std::string& uid, const std::string& device) {
    claims_[name] = ClaimInfo{uid, {{"mig", kDriverName, "node-1", device}}};
  }

  v1::NodePrepareResourcesResponse prepare(const std::string& name, const std::string& uid) {
    return polyaccel::testing::node_prepare(plugin_->endpoint(), {{name, uid}});
  }

  std::string unprepare(const std::string& name, const std::string& uid) {
    return polyaccel::testing::node_unprepare(plugin_->endpoint(), {{name, uid}})
        .claims()
        .at(uid)
        .error();
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
  // The full GPU offers its instances and no placement beside them.
  for (const auto& s : pool_.slices)
    for (const auto& d : s.devices)
      if (d.kind == DeviceKind::mig &&
          model_.accelerators[d.accelerator].pci.address.to_string() == kFullGpu) {
        EXPECT_TRUE(d.mig_instance) << d.name << " overlaps the GPU's instances";
      }

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

// A claim for one MIG device of `profile` on the GPU at `bdf` (the mig-3g template with its
// selector, narrowed to one GPU by its PCI bus id).
testing::ClaimSpec mig_claim(const std::string& profile, const std::string& bdf) {
  testing::DeviceRequest r;
  r.name = "mig";
  r.type = "mig";
  r.selector = [profile, bdf](const nlohmann::json& d) {
    return testing::device_attribute(d, "polyaccel.io/migProfile").value("string", "") == profile &&
           testing::device_attribute(d, "resource.kubernetes.io/pciBusID").value("string", "") ==
               bdf;
  };
  return {{r}, {}};
}

// Profiles largest first, as users who ask for what they need would fill a GPU.
const char* const kProfiles[] = {"7g.141gb", "4g.71gb",    "3g.71gb", "2g.35gb",
                                 "1g.35gb",  "1g.18gb+me", "1g.18gb"};

// Instances exist before the agent (a 3g.71gb at memory slices 4-7 made by `mig apply`), a claim
// gets a 1g.18gb placement that prepare makes, the agent restarts (its pool now shows both), and
// claims fill the GPU to exhaustion, the scheduler reading the slices as the server stores them:
// every placement it hands out is one prepare makes, and the full GPUs give none.
TEST_F(DynamicMig, ExistingAndHeldInstancesAreAccountedAcrossARestartUpToExhaustion) {
  ASSERT_TRUE(control_);
  const MigGeometry* g = find_mig_geometry(0x233510DE);
  ASSERT_NE(g, nullptr);
  auto made = control_->create(gpu_index(kEmptyGpu), g->profile("3g.71gb")->profile_id, 4);
  ASSERT_TRUE(made) << made.error().message();
  rescan();
  // The existing 3g.71gb is offered as itself; nothing that overlaps it is.
  const std::string existing = device(kEmptyGpu, "3g.71gb", 4);
  EXPECT_TRUE(pool_.device(existing)->mig_instance);
  EXPECT_TRUE(pool_.device(existing)->consumes.empty());
  for (const auto& s : pool_.slices)
    for (const auto& d : s.devices)
      if (d.kind == DeviceKind::mig && !d.mig_instance) {
        EXPECT_TRUE(d.mig_start + d.mig_size <= 4 ||
                    model_.accelerators[d.accelerator].pci.address.to_string() != kEmptyGpu)
            << d.name;
      }

  testing::StructuredAllocator scheduler;
  std::int64_t generation = 1;
  scheduler.set_slices(stored_slices(generation));
  start_plugin();
  auto a = scheduler.allocate(mig_claim("1g.18gb", kEmptyGpu));
  ASSERT_TRUE(a);
  claim("a", kUidA, a->front());
  ASSERT_EQ(prepare("a", kUidA).claims().at(kUidA).error(), "") << log_;
  EXPECT_EQ(instances(kEmptyGpu).size(), 2u);

  // The agent restarts: the instance claim "a" holds exists now, as the 3g.71gb does. The
  // scheduler keeps "a"'s allocation (the same device name) and reads the new slices.
  plugin_->stop();
  plugin_.reset();
  rescan();
  ASSERT_NE(pool_.device(a->front()), nullptr) << "the held instance keeps its name";
  EXPECT_TRUE(pool_.device(a->front())->mig_instance);
  start_plugin();
  scheduler.set_slices(stored_slices(++generation));
  EXPECT_EQ(prepare("a", kUidA).claims().at(kUidA).error(), "") << "a repeat after the restart";

  // Fill: as long as any profile fits, a claim gets it and prepare makes it; the agent
  // republishes after each (as the runner does on the rescan that sees the new instance).
  std::vector<std::pair<std::string, std::string>> held;  // claim name, uid
  for (int round = 0; round < 16; ++round) {
    std::optional<std::vector<std::string>> got;
    for (const char* p : kProfiles)
      if ((got = scheduler.allocate(mig_claim(p, kEmptyGpu)))) break;
    if (!got) break;
    std::string name = "fill-" + std::to_string(round);
    std::string uid = "00000000-0000-0000-0000-0000000000" + std::to_string(10 + round);
    claim(name, uid, got->front());
    auto r = prepare(name, uid);
    ASSERT_EQ(r.claims().at(uid).error(), "") << got->front() << ": " << log_;
    held.emplace_back(name, uid);
    rescan();
    plugin_->set_devices(model_, pool_, read_cdi_host(model_, root().string()));
    scheduler.set_slices(stored_slices(++generation));
  }
  EXPECT_FALSE(held.empty());
  // What the GPU holds now: the claims' instances and the 3g.71gb (which a claim may hold too:
  // it is offered as itself), never more than its compute slices.
  unsigned compute = 0;
  for (const auto& i : instances(kEmptyGpu))
    compute += g->profile(i.profile)->compute_slices;
  EXPECT_LE(compute, g->compute_slices);
  for (const char* p : kProfiles)
    EXPECT_FALSE(scheduler.allocate(mig_claim(p, kEmptyGpu))) << p << " after exhaustion";
  // The GPUs whose instances fill them give no placement at all.
  for (const std::string& bdf :
       {kFullGpu, std::string("0000:2a:00.0"), std::string("0000:3a:00.0")})
    for (const char* p : kProfiles) {
      auto got = scheduler.allocate(mig_claim(p, bdf));
      if (got) {
        EXPECT_TRUE(pool_.device(got->front())->mig_instance) << got->front();
      }
    }

  for (const auto& [name, uid] : held)
    EXPECT_EQ(unprepare(name, uid), "");
  EXPECT_EQ(unprepare("a", kUidA), "");
  auto left = instances(kEmptyGpu);
  ASSERT_EQ(left.size(), 1u) << "the 3g.71gb made before the agent stays";
  EXPECT_EQ(left[0].profile, "3g.71gb");
  EXPECT_TRUE(control_->destroy(gpu_index(kEmptyGpu), left[0].gpu_instance_id));
}

// The same fill without a republish between the claims (a scheduler quicker than the agent):
// every allocation is made over the slices of the start, and every one prepares.
TEST_F(DynamicMig, AFillOverOneGenerationOfSlicesNeverGetsARefusedPlacement) {
  ASSERT_TRUE(control_);
  const MigGeometry* g = find_mig_geometry(0x233510DE);
  ASSERT_NE(g, nullptr);
  ASSERT_TRUE(control_->create(gpu_index(kEmptyGpu), g->profile("1g.35gb")->profile_id, 2));
  rescan();
  testing::StructuredAllocator scheduler;
  scheduler.set_slices(stored_slices(1));
  start_plugin();
  std::vector<std::string> got;
  for (int round = 0; round < 16; ++round) {
    std::optional<std::vector<std::string>> a;
    for (const char* p : {"1g.18gb", "2g.35gb", "3g.71gb"})  // small ones first: the most claims
      if ((a = scheduler.allocate(mig_claim(p, kEmptyGpu)))) break;
    if (!a) break;
    got.push_back(a->front());
  }
  EXPECT_GE(got.size(), 5u);  // 1g.18gb at 0, 1, 4, 5, 6 beside the 1g.35gb at 2-3
  for (size_t k = 0; k < got.size(); ++k) {
    std::string uid = "00000000-0000-0000-0000-0000000001" + std::to_string(10 + k);
    claim("c" + std::to_string(k), uid, got[k]);
    ASSERT_EQ(prepare("c" + std::to_string(k), uid).claims().at(uid).error(), "")
        << got[k] << ": " << log_;
  }
  for (size_t k = 0; k < got.size(); ++k)
    EXPECT_EQ(unprepare("c" + std::to_string(k),
                        "00000000-0000-0000-0000-0000000001" + std::to_string(10 + k)),
              "");
  auto left = instances(kEmptyGpu);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_TRUE(control_->destroy(gpu_index(kEmptyGpu), left[0].gpu_instance_id));
}

}  // namespace
}  // namespace polyaccel::dra
