// The node-label MIG workflow (src/partition_manager) against a test that plays the API server
// over real HTTP (dra/fake_api_server.h: Nodes, ConfigMaps, evictions, Events checked against
// core/v1's schema), kubelet's pod-resources over real gRPC (support/fake_pod_resources.h) and
// the test build of libnvidia-ml.so.1 (8 H200s, tests/inject/nvml) through the production MIG
// loader: label → pending → success with only the changing GPUs withdrawn, pods waited for or
// evicted, bad configs failing with nothing changed, a kill after each step followed by a
// restart, a ConfigMap edited during an apply, a mode change that needs a GPU reset.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <set>
#include <thread>

#include "core/file_io.h"
#include "discover/accel/backends.h"
#include "discover/discover.h"
#include "dra/fake_api_server.h"
#include "dra/runner.h"
#include "kube/fake_kubelet.h"
#include "kube/pod_resources.h"
#include "kube/runner.h"
#include "partition_manager/amd_workflow.h"
#include "partition_manager/label_manager.h"
#include "partition_manager/mig_workflow.h"
#include "partition_manager/state_file.h"
#include "support/fake_pod_resources.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

using nlohmann::json;
using polyaccel::testing::FakeApiServer;
using polyaccel::testing::FakeContainer;
using polyaccel::testing::FakeKubelet;
using polyaccel::testing::FakePodResources;
using polyaccel::testing::TempDir;

const std::string kNode = "gpu-node-1";
const std::string kScenario = std::string(NVML_SCENARIO_DIR) + "/hgx-8xh200-mig.json";
// The scenario's bus ids, by NVML index.
const std::vector<std::string> kBus = {"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0",
                                       "0000:5d:00.0", "0000:9a:00.0", "0000:ab:00.0",
                                       "0000:ba:00.0", "0000:db:00.0"};

// mig-parted's format, as the GPU Operator's ConfigMap holds it.
const std::string kConfig = R"(version: v1
mig-configs:
  # GPU 0 keeps its 7 x 1g.18gb; GPU 1 (3g.71gb + 4 x 1g.18gb) becomes 7 x 1g.18gb; GPU 3 (MIG
  # on, empty) gets the balanced layout.
  two-change:
    - devices: [0, 1]
      mig-enabled: true
      mig-devices: {"1g.18gb": 7}
    - devices: [3]
      mig-enabled: true
      mig-devices: {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}
  gpu3-full:
    - devices: [3]
      mig-enabled: true
      mig-devices: {"7g.141gb": 1}
  too-many:
    - devices: [3]
      mig-enabled: true
      mig-devices: {"1g.18gb": 8}
  enable-gpu4:
    - devices: [4]
      mig-enabled: true
      mig-devices: {"1g.18gb": 7}
  all-balanced:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}
)";

class MigLabels : public ::testing::Test {
 protected:
  MigLabels() : server_(dir_.path()), pods_((dir_.path() / "pod-resources.sock").string()) {
    ::setenv("POLYACCEL_NVML_LIB", NVML_INJECT_LIB, 1);
    ::setenv("NVML_INJECT_SCENARIO", kScenario.c_str(), 1);
    ::setenv("POLYACCEL_LOCK_DIR", dir_.path().c_str(), 1);
    {
      std::lock_guard<std::mutex> lock(server_.mu);
      server_.nodes[kNode] = {{"apiVersion", "v1"},
                              {"kind", "Node"},
                              {"metadata", {{"name", kNode}, {"labels", json::object()}}}};
      set_config_map(kConfig);
      server_.on_eviction = [this](const std::string& ns, const std::string& pod) {
        evicted_.push_back(ns + "/" + pod);
        std::vector<FakeContainer> left;
        for (const auto& c : containers_)
          if (!(c.pod == pod && c.pod_namespace == ns)) left.push_back(c);
        containers_ = left;
        pods_.set(containers_);
      };
    }
    kube_api::KubeConfig c;
    c.server = server_.url();
    c.token = "test-token";
    c.timeout = std::chrono::milliseconds(3000);
    client_ = std::make_unique<kube_api::KubeClient>(c);
    // The driver keeps its MIG state while agents come and go: one control stays open for the
    // whole test, so that the library's state outlives each manager (a "killed" agent).
    auto keep = open_nvml_mig_control();
    EXPECT_TRUE(keep) << keep.error().message();
    if (keep) driver_ = std::move(*keep);
  }
  ~MigLabels() override {
    std::lock_guard<std::mutex> lock(server_.mu);
    EXPECT_TRUE(server_.schema_errors.empty()) << server_.schema_errors.front();
  }

  void set_config_map(const std::string& text) {  // under server_.mu
    server_.config_maps["polyaccel-system/default-mig-parted-config"] = {
        {"apiVersion", "v1"},
        {"kind", "ConfigMap"},
        {"metadata", {{"name", "default-mig-parted-config"}, {"namespace", "polyaccel-system"}}},
        {"data", {{"config.yaml", text}}}};
  }
  void label(const std::string& config) {
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.nodes[kNode]["metadata"]["labels"][kMigConfigLabel] = config;
  }
  std::string node_label(const std::string& key) {
    std::lock_guard<std::mutex> lock(server_.mu);
    return server_.nodes[kNode]["metadata"]["labels"].value(key, "");
  }
  // The values the state label was set to, in order.
  std::vector<std::string> states() {
    std::lock_guard<std::mutex> lock(server_.mu);
    std::vector<std::string> out;
    for (const auto& p : server_.label_patches)
      if (p.contains(kMigConfigStateLabel)) out.push_back(p[kMigConfigStateLabel]);
    return out;
  }
  std::vector<json> events() {
    std::lock_guard<std::mutex> lock(server_.mu);
    return server_.events;
  }
  void set_pods(std::vector<FakeContainer> containers) {
    std::lock_guard<std::mutex> lock(server_.mu);
    containers_ = std::move(containers);
    pods_.set(containers_);
  }

  PartitionManagerOptions options() {
    PartitionManagerOptions o = mig_manager_options();
    o.node = kNode;
    o.state_file = dir_.path() / "mig-label-manager.json";
    o.pod_check = std::chrono::milliseconds(20);
    o.pod_wait = std::chrono::seconds(20);
    o.log = [](const std::string&) {};
    return o;
  }
  PartitionManagerHooks hooks() {
    PartitionManagerHooks h;
    h.workflow = mig_workflow();
    h.withdraw = [this](const std::set<std::string>& gpus) {
      std::lock_guard<std::mutex> lock(withdraw_mu_);
      withdrawals_.push_back(gpus);
    };
    h.pods = [this] {
      PodResourcesOptions po;
      po.socket = (dir_.path() / "pod-resources.sock").string();
      return list_pod_resources(po);
    };
    return h;
  }
  std::vector<std::set<std::string>> withdrawals() {
    std::lock_guard<std::mutex> lock(withdraw_mu_);
    return withdrawals_;
  }
  // Every GPU ever withdrawn.
  std::set<std::string> ever_withdrawn() {
    std::set<std::string> all;
    for (const auto& w : withdrawals())
      all.insert(w.begin(), w.end());
    return all;
  }

  // "1g.18gb@0 1g.18gb@1 ..." of each GPU, by index.
  std::vector<std::string> layouts() {
    std::vector<std::string> out;
    auto gpus = driver_->gpus();
    EXPECT_TRUE(gpus) << gpus.error().message();
    if (!gpus) return out;
    for (const auto& g : *gpus) {
      std::string s = g.mig_enabled ? "on:" : "off:";
      auto instances = g.instances;
      std::sort(instances.begin(), instances.end(),
                [](const auto& a, const auto& b) { return a.start < b.start; });
      for (const auto& i : instances)
        s += " " + std::to_string(i.profile_id) + "@" + std::to_string(i.start);
      out.push_back(s);
    }
    return out;
  }
  std::string mig_uuid(unsigned gpu, size_t instance) {
    auto gpus = driver_->gpus();
    return gpus ? (*gpus)[gpu].instances.at(instance).uuid : "";
  }

  TempDir dir_;
  FakeApiServer server_;
  FakePodResources pods_;
  std::vector<FakeContainer> containers_;  // under server_.mu
  std::vector<std::string> evicted_;       // under server_.mu
  std::unique_ptr<kube_api::KubeClient> client_;
  std::unique_ptr<MigControl> driver_;
  std::mutex withdraw_mu_;
  std::vector<std::set<std::string>> withdrawals_;
};

TEST_F(MigLabels, ALabelAppliesItsConfigToTheGpusThatChangeOnly) {
  auto before = layouts();
  label("two-change");
  PartitionLabelManager m(*client_, options(), hooks());
  ASSERT_TRUE(m.recover());
  ASSERT_TRUE(m.reconcile_once());
  EXPECT_EQ(states(), (std::vector<std::string>{"pending", "success"}));
  EXPECT_EQ(node_label(kMigConfigStateLabel), "success");
  auto after = layouts();
  EXPECT_EQ(after[0], before[0]) << "GPU 0 has the layout already";
  EXPECT_EQ(after[1], "on: 19@0 19@1 19@2 19@3 19@4 19@5 19@6");
  EXPECT_NE(after[3], before[3]);
  for (unsigned i : {2u, 4u, 5u, 6u, 7u}) {
    EXPECT_EQ(after[i], before[i]) << "GPU " << i;
  }
  // Only GPUs 1 and 3 stopped being advertised, and every GPU is advertised at the end.
  EXPECT_EQ(ever_withdrawn(), (std::set<std::string>{kBus[1], kBus[3]}));
  ASSERT_FALSE(withdrawals().empty());
  EXPECT_TRUE(withdrawals().back().empty());
  auto e = events();
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0]["type"], "Normal");
  EXPECT_EQ(e[0]["reason"], "MigConfigApplied");
  EXPECT_EQ(e[0]["involvedObject"]["kind"], "Node");
  EXPECT_EQ(e[0]["metadata"]["namespace"], "default");  // the test server refuses any other
  EXPECT_NE(e[0]["message"].get<std::string>().find(kBus[1]), std::string::npos);
  auto record = read_partition_apply_record(options().state_file);
  ASSERT_TRUE(record && *record);
  EXPECT_EQ((*record)->phase, ApplyPhase::done);
  EXPECT_EQ(m.last_outcome().changed_gpus, (std::vector<std::string>{kBus[1], kBus[3]}));

  // The same label again: nothing to do, no new write.
  size_t patches = states().size();
  ASSERT_TRUE(m.reconcile_once());
  EXPECT_EQ(states().size(), patches);
  EXPECT_EQ(events().size(), 1u);
}

TEST_F(MigLabels, PodsHoldingAChangingGpuAreWaitedForAndOthersAreNot) {
  std::string on_gpu1 = mig_uuid(1, 0), on_gpu0 = mig_uuid(0, 0);
  set_pods({{"train-0", "ml", "main", "nvidia.com/mig-3g.71gb", {on_gpu1}},
            {"serve-0", "ml", "main", "nvidia.com/mig-1g.18gb", {on_gpu0}}});
  label("two-change");
  PartitionLabelManager m(*client_, options(), hooks());
  ASSERT_TRUE(m.recover());
  std::thread apply([&] { EXPECT_TRUE(m.reconcile_once()); });
  // While train-0 runs, GPU 1 (and 3) are withdrawn and nothing is applied; GPU 0 serves.
  for (int i = 0; i < 500 && m.withdrawn().empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(m.withdrawn(), (std::set<std::string>{kBus[1], kBus[3]}));
  EXPECT_EQ(node_label(kMigConfigStateLabel), "pending");
  auto gpus = driver_->gpus();
  ASSERT_TRUE(gpus);
  EXPECT_EQ((*gpus)[1].instances.size(), 5u) << "nothing applied while the pod runs";
  set_pods({{"serve-0", "ml", "main", "nvidia.com/mig-1g.18gb", {on_gpu0}}});  // train-0 ended
  apply.join();
  EXPECT_EQ(node_label(kMigConfigStateLabel), "success");
  EXPECT_TRUE(evicted_.empty()) << "no eviction without the policy";
  EXPECT_EQ(ever_withdrawn().count(kBus[0]), 0u);
}

TEST_F(MigLabels, TheEvictionPolicyEvictsThePodsAndRetriesABudgetsRefusal) {
  set_pods({{"train-0", "ml", "main", "nvidia.com/mig-3g.71gb", {mig_uuid(1, 0)}},
            {"serve-0", "ml", "main", "nvidia.com/mig-1g.18gb", {mig_uuid(0, 0)}}});
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.refuse_next_evictions = 1;  // a PodDisruptionBudget says no once
  }
  label("two-change");
  auto o = options();
  o.evict_pods = true;
  PartitionLabelManager m(*client_, o, hooks());
  ASSERT_TRUE(m.recover());
  ASSERT_TRUE(m.reconcile_once());
  EXPECT_EQ(node_label(kMigConfigStateLabel), "success");
  std::lock_guard<std::mutex> lock(server_.mu);
  EXPECT_EQ(server_.evictions, std::vector<std::string>{"ml/train-0"});
}

TEST_F(MigLabels, PodsThatDoNotEndFailTheApplyWithNothingChanged) {
  set_pods({{"train-0", "ml", "main", "nvidia.com/mig-3g.71gb", {mig_uuid(1, 0)}}});
  auto before = layouts();
  label("two-change");
  auto o = options();
  o.pod_wait = std::chrono::milliseconds(200);
  PartitionLabelManager m(*client_, o, hooks());
  ASSERT_TRUE(m.recover());
  ASSERT_TRUE(m.reconcile_once());
  EXPECT_EQ(node_label(kMigConfigStateLabel), "failed");
  EXPECT_EQ(layouts(), before);
  EXPECT_TRUE(m.withdrawn().empty()) << "nothing changed: advertised again";
  auto e = events();
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0]["type"], "Warning");
  EXPECT_NE(e[0]["message"].get<std::string>().find("ml/train-0"), std::string::npos)
      << e[0]["message"];
  // Failed stays failed until the label changes: no retry loop.
  ASSERT_TRUE(m.reconcile_once());
  EXPECT_EQ(events().size(), 1u);
}

struct BadConfig {
  std::string label;
  std::string config_map;  // empty: kConfig
  std::string reason;      // in the Event's message
};

TEST_F(MigLabels, BadConfigsFailWithTheirReasonAndChangeNothing) {
  const std::vector<BadConfig> cases = {
      {"no-such-config", "", "has no config 'no-such-config'"},
      {"too-many", "", "1g.18gb"},
      {"two-change", "version: v2\nmig-configs: {}\n", "version"},
      {"two-change", "version: v1\nmig-configs:\n  two-change: [ {devices: all\n", "ConfigMap"},
  };
  auto before = layouts();
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    {
      std::lock_guard<std::mutex> lock(server_.mu);
      set_config_map(c.config_map.empty() ? kConfig : c.config_map);
      server_.events.clear();
    }
    // A fresh state file each time, so that each case is a first apply.
    std::filesystem::remove(options().state_file);
    label(c.label);
    PartitionLabelManager m(*client_, options(), hooks());
    ASSERT_TRUE(m.recover());
    ASSERT_TRUE(m.reconcile_once());
    EXPECT_EQ(node_label(kMigConfigStateLabel), "failed") << c.label;
    auto e = events();
    ASSERT_EQ(e.size(), 1u) << c.label;
    EXPECT_EQ(e[0]["reason"], "MigConfigFailed");
    EXPECT_NE(e[0]["message"].get<std::string>().find(c.reason), std::string::npos)
        << i << ": " << e[0]["message"];
    EXPECT_EQ(layouts(), before) << c.label;
    EXPECT_TRUE(ever_withdrawn().empty()) << c.label;
  }
  // No ConfigMap at all.
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.config_maps.clear();
  }
  std::filesystem::remove(options().state_file);
  label("two-change");
  PartitionLabelManager m(*client_, options(), hooks());
  ASSERT_TRUE(m.reconcile_once());
  EXPECT_EQ(node_label(kMigConfigStateLabel), "failed");
  EXPECT_NE(m.last_outcome().reason.find("default-mig-parted-config"), std::string::npos);
}

TEST_F(MigLabels, AKillAfterEachStepThenARestartFinishesTheApply) {
  const std::vector<ApplyStep> steps = {ApplyStep::pending_set, ApplyStep::gpus_withdrawn,
                                        ApplyStep::pods_gone, ApplyStep::gpu_applied,
                                        ApplyStep::verified};
  std::vector<std::string> wanted;
  for (size_t k = 0; k < steps.size(); ++k) {
    // The driver as the scenario has it, a fresh state file, the label set.
    driver_.reset();
    auto keep = open_nvml_mig_control();
    ASSERT_TRUE(keep);
    driver_ = std::move(*keep);
    std::filesystem::remove(options().state_file);
    label("two-change");
    {
      PartitionManagerHooks h = hooks();
      h.after_step = [&](ApplyStep s) { return s != steps[k]; };
      PartitionLabelManager killed(*client_, options(), h);
      ASSERT_TRUE(killed.recover());
      ASSERT_TRUE(killed.reconcile_once());
      EXPECT_TRUE(killed.last_outcome().abandoned) << k;
      EXPECT_EQ(node_label(kMigConfigStateLabel), "pending") << k;
    }
    auto record = read_partition_apply_record(options().state_file);
    ASSERT_TRUE(record) << record.error().message();
    if (k >= 1) {
      ASSERT_TRUE(*record) << k;
      EXPECT_TRUE((*record)->unfinished()) << k;
      EXPECT_EQ((*record)->gpus, (std::vector<std::string>{kBus[1], kBus[3]})) << k;
    }
    // The restarted agent withdraws what the record names before anything else, then finishes.
    withdrawals_.clear();
    PartitionLabelManager restarted(*client_, options(), hooks());
    ASSERT_TRUE(restarted.recover());
    if (k >= 1) {
      EXPECT_EQ(restarted.withdrawn(), (std::set<std::string>{kBus[1], kBus[3]})) << k;
    }
    ASSERT_TRUE(restarted.reconcile_once());
    EXPECT_EQ(node_label(kMigConfigStateLabel), "success") << k;
    EXPECT_TRUE(restarted.withdrawn().empty()) << k;
    auto now = layouts();
    if (wanted.empty()) wanted = now;
    EXPECT_EQ(now, wanted) << "step " << k << " ends in the same layout";
  }
  EXPECT_EQ(wanted[1], "on: 19@0 19@1 19@2 19@3 19@4 19@5 19@6");
}

TEST_F(MigLabels, AKillHalfWayThenALabelThatFailsSaysSoAndKeepsTheGpusWithdrawn) {
  label("two-change");
  {
    PartitionManagerHooks h = hooks();
    h.after_step = [](ApplyStep s) { return s != ApplyStep::gpu_applied; };
    PartitionLabelManager killed(*client_, options(), h);
    ASSERT_TRUE(killed.recover());
    ASSERT_TRUE(killed.reconcile_once());
  }
  label("no-such-config");
  PartitionLabelManager restarted(*client_, options(), hooks());
  ASSERT_TRUE(restarted.recover());
  ASSERT_TRUE(restarted.reconcile_once());
  EXPECT_EQ(node_label(kMigConfigStateLabel), "failed");
  EXPECT_EQ(restarted.withdrawn(), (std::set<std::string>{kBus[1], kBus[3]}))
      << "half-configured GPUs are not advertised";
  auto record = read_partition_apply_record(options().state_file);
  ASSERT_TRUE(record && *record);
  EXPECT_EQ((*record)->phase, ApplyPhase::failed);
  // A later good label finishes them and advertises them again.
  label("two-change");
  ASSERT_TRUE(restarted.reconcile_once());
  EXPECT_EQ(node_label(kMigConfigStateLabel), "success");
  EXPECT_TRUE(restarted.withdrawn().empty());
}

TEST_F(MigLabels, AConfigMapEditedDuringAnApplyCountsForTheNextOne) {
  label("gpu3-full");
  PartitionManagerHooks h = hooks();
  h.after_step = [&](ApplyStep s) {
    if (s == ApplyStep::gpus_withdrawn) {
      std::lock_guard<std::mutex> lock(server_.mu);
      std::string edited = kConfig;
      edited.replace(edited.find("{\"7g.141gb\": 1}"), 15, "{\"1g.18gb\": 7}");
      set_config_map(edited);
    }
    return true;
  };
  PartitionLabelManager m(*client_, options(), h);
  ASSERT_TRUE(m.recover());
  ASSERT_TRUE(m.reconcile_once());
  EXPECT_EQ(node_label(kMigConfigStateLabel), "success");
  EXPECT_EQ(layouts()[3], "on: 0@0") << "the config as read when the apply began";
}

TEST_F(MigLabels, AModeChangeThatNeedsAResetIsReportedRebooting) {
  label("enable-gpu4");
  PartitionLabelManager m(*client_, options(), hooks());
  ASSERT_TRUE(m.recover());
  ASSERT_TRUE(m.reconcile_once());
  EXPECT_EQ(node_label(kMigConfigStateLabel), "rebooting");
  EXPECT_EQ(m.withdrawn(), std::set<std::string>{kBus[4]});
  auto e = events();
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0]["reason"], "MigConfigNeedsGpuReset");
  auto record = read_partition_apply_record(options().state_file);
  ASSERT_TRUE(record && *record);
  EXPECT_EQ((*record)->phase, ApplyPhase::rebooting);
}

// The time from label to success on an 8-GPU node, the apply's own (planning, the driver's calls,
// the API writes), without pod waits: printed for the issue's note, never asserted.
TEST_F(MigLabels, EightGpusFromLabelToSuccess) {
  driver_.reset();
  auto scenario = json::parse(std::ifstream(kScenario));
  for (auto& d : scenario["devices"]) {
    d["mig"]["current"] = true;  // every GPU in MIG mode: no reset in this measure
    d["mig"]["pending"] = true;
    // No host process on an instance (GPU 2's would refuse its destroy: NVML 19, in use).
    for (auto& i : d["mig"]["instances"])
      i.erase("processes");
  }
  std::string path = (dir_.path() / "all-mig.json").string();
  polyaccel::testing::write_text(path, scenario.dump());
  ::setenv("NVML_INJECT_SCENARIO", path.c_str(), 1);
  auto keep = open_nvml_mig_control();
  ASSERT_TRUE(keep);
  driver_ = std::move(*keep);
  label("all-balanced");
  PartitionLabelManager m(*client_, options(), hooks());
  ASSERT_TRUE(m.recover());
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(m.reconcile_once());
  auto wall = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(node_label(kMigConfigStateLabel), "success") << m.last_outcome().reason;
  EXPECT_EQ(m.last_outcome().changed_gpus.size(), 8u);
  auto gpus = driver_->gpus();
  ASSERT_TRUE(gpus);
  for (const auto& g : *gpus) {  // the balanced counts, wherever the planner kept instances
    std::multiset<unsigned> profiles;
    for (const auto& i : g.instances)
      profiles.insert(i.profile_id);
    EXPECT_EQ(profiles, (std::multiset<unsigned>{19, 19, 14, 9})) << "GPU " << g.index;
  }
  std::cout << "[ measure  ] 8 GPUs, label to success: apply "
            << std::chrono::duration<double, std::milli>(m.last_outcome().apply_time).count()
            << " ms, reconcile wall " << std::chrono::duration<double, std::milli>(wall).count()
            << " ms\n";
}

// The agent's loop: the Node is watched, so a label change starts the apply at once, long before
// the slow re-check; a dropped watch and a 410 Gone are followed by a new GET and a new watch.
TEST_F(MigLabels, ALabelChangeIsSeenThroughTheWatchAndDroppedWatchesAreReopened) {
  PartitionManagerOptions o = options();
  o.recheck = std::chrono::minutes(10);  // a poll would not see anything within the test
  PartitionLabelManager m(*client_, o, hooks());
  ASSERT_TRUE(m.recover());
  auto node_watches = [&] {
    std::lock_guard<std::mutex> lock(server_.mu);
    return server_.node_watches;
  };
  auto until = [](const std::function<bool()>& done) {
    // Generous: under ThreadSanitizer beside the DRA tests an apply took over 30 s once; a
    // missed watch event would wait for the 10-minute re-check and still fail.
    for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(120);
         std::chrono::steady_clock::now() < end;
         std::this_thread::sleep_for(std::chrono::milliseconds(1)))
      if (done()) return true;
    return false;
  };
  // Sets the label as kubectl would and waits for `success`; label -> pending, measured.
  auto relabel = [&](const std::string& config) {
    size_t before = states().size();
    auto t0 = std::chrono::steady_clock::now();
    server_.update_node(kNode, [&](json& n) { n["metadata"]["labels"][kMigConfigLabel] = config; });
    EXPECT_TRUE(until([&] { return states().size() > before; })) << config << ": never pending";
    auto latency = std::chrono::steady_clock::now() - t0;
    EXPECT_TRUE(until([&] { return node_label(kMigConfigStateLabel) == "success"; }))
        << config << ": " << m.last_outcome().reason;
    auto s = states();
    EXPECT_GT(s.size(), before);
    if (s.size() > before) {
      EXPECT_EQ(s[before], "pending");
    }
    std::cout << "[ measure  ] " << config << ": label -> pending "
              << std::chrono::duration<double, std::milli>(latency).count() << " ms\n";
  };
  m.start();
  ASSERT_TRUE(until([&] { return node_watches() >= 1; }));
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    bool watched_from_the_get = false;
    for (const auto& [method, path] : server_.seen)
      if (method == "GET" &&
          path.rfind("/api/v1/nodes?fieldSelector=metadata.name%3D" + std::string(kNode) +
                         "&resourceVersion=",
                     0) == 0 &&
          path.find("&watch=1") != std::string::npos)
        watched_from_the_get = true;
    EXPECT_TRUE(watched_from_the_get) << "a watch of this Node from the GET's resourceVersion";
  }
  relabel("two-change");
  EXPECT_EQ(ever_withdrawn(), (std::set<std::string>{kBus[1], kBus[3]}));

  // The connection drops: the manager reads the Node again and watches again.
  unsigned open = node_watches();
  server_.close_watches();
  ASSERT_TRUE(until([&] { return node_watches() > open; }));
  relabel("gpu3-full");

  // The server answers the next watch 410 Gone: read again (a re-list), watch again.
  open = node_watches();
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.expire_next_node_watches = 1;
  }
  server_.close_watches();
  ASSERT_TRUE(until([&] { return node_watches() >= open + 2; }));
  relabel("two-change");

  // Every watch ends at once without an event (a proxy closing each stream): at most one look a
  // second, not a loop of GETs and watches.
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.end_node_watches_at_once = true;
  }
  server_.close_watches();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  open = node_watches();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_LE(node_watches() - open, 4u) << "watches in 3 s";
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.end_node_watches_at_once = false;
  }
  m.stop();
  EXPECT_EQ(ever_withdrawn(), (std::set<std::string>{kBus[1], kBus[3]}));
  EXPECT_TRUE(withdrawals().back().empty()) << "every GPU advertised at the end";
}

// End to end through the device plugin: the agent's DevicePluginRunner, fed by the accelerator
// monitor on the same test NVML, registers with a kubelet played over the real device-plugin gRPC
// protocol, and the label manager's withdraw goes to it (as cli/agent_partition.cc wires it).
// While the apply runs, ListAndWatch shows GPUs 1 and 3 (the ones two-change changes) Unhealthy
// and the other six Healthy; after it, all eight Healthy; no response ever shows an untouched GPU
// otherwise.
TEST_F(MigLabels, KubeletSeesOnlyTheChangingGpusUnhealthyDuringTheApply) {
  ::setenv("POLYACCEL_ROCM_SMI_LIB", "/nonexistent/librocm_smi64.so.1", 1);
  ::setenv("POLYACCEL_HLML_LIB", "/nonexistent/libhlml.so", 1);
  DiscoverOptions discover;
  discover.topology_xml =
      polyaccel::testing::topology_fixture(polyaccel::testing::kXe8640).string();
  auto host = discover_host(discover);
  ASSERT_TRUE(host) << host.error().message();
  std::map<std::string, std::string> uuid_of;  // bus id -> GPU UUID, from the scenario
  const json scenario = json::parse(std::ifstream(kScenario));
  for (const auto& d : scenario["devices"])
    uuid_of[d["pci_bus_id"].get<std::string>()] = d["uuid"].get<std::string>();
  ASSERT_EQ(uuid_of.size(), 8u);
  const std::set<std::string> changing = {uuid_of[kBus[1]], uuid_of[kBus[3]]};

  MonitorOptions mo;
  mo.interval = std::chrono::milliseconds(50);
  mo.rescan = std::chrono::milliseconds(100);
  AcceleratorMonitor monitor(*host, make_all_backends(), mo);
  monitor.start();
  std::filesystem::create_directories(dir_.path() / "device-plugins");
  FakeKubelet kubelet((dir_.path() / "device-plugins").string());
  DevicePluginOptions po;
  po.kubelet_dir = (dir_.path() / "device-plugins").string();
  po.poll_interval = std::chrono::milliseconds(50);
  po.root = "";
  po.mig_strategy = MigStrategy::none;  // whole GPUs, by UUID: ids that survive the apply
  po.log = [](const std::string&) {};
  DevicePluginRunner runner(monitor, po);
  ASSERT_TRUE(runner.start(std::chrono::seconds(60)));
  auto ep = kubelet.endpoint("nvidia.com/gpu");
  ASSERT_TRUE(ep);
  // The health of each of the scenario's 8 GPUs in a response; empty when it does not list all
  // 8. (The XE8640 topology's own GPUs, which NVML does not know, are listed Unhealthy by bus id
  // throughout: not looked at.)
  std::set<std::string> scenario_gpus;
  for (const auto& [bus, uuid] : uuid_of)
    scenario_gpus.insert(uuid);
  auto health = [&](const v1beta1::ListAndWatchResponse& r) {
    std::map<std::string, std::string> h;
    for (const auto& d : r.devices())
      if (scenario_gpus.count(d.id())) h[d.id()] = d.health();
    return h.size() == 8 ? h : std::map<std::string, std::string>{};
  };
  auto unhealthy = [&](const v1beta1::ListAndWatchResponse& r) {
    std::set<std::string> out;
    for (const auto& [id, state] : health(r))
      if (state != "Healthy") out.insert(id);
    return out;
  };
  auto all_eight = [&](const v1beta1::ListAndWatchResponse& r) { return !health(r).empty(); };
  ASSERT_TRUE(kubelet.wait_update(
      ep, [&](const auto& r) { return all_eight(r) && unhealthy(r).empty(); },
      std::chrono::seconds(30)));
  const size_t before_apply = kubelet.update_count(ep);

  PartitionManagerHooks h = hooks();
  auto record = h.withdraw;
  h.withdraw = [&](const std::set<std::string>& gpus) {
    record(gpus);
    runner.set_withdrawn(gpus);
  };
  bool seen_during_apply = false;
  h.after_step = [&](ApplyStep s) {
    // GPUs withdrawn, pods gone, nothing changed yet: what kubelet has now.
    if (s == ApplyStep::pods_gone)
      seen_during_apply =
          kubelet
              .wait_update(
                  ep, [&](const auto& r) { return all_eight(r) && unhealthy(r) == changing; },
                  std::chrono::seconds(10))
              .has_value();
    return true;
  };
  label("two-change");
  PartitionLabelManager m(*client_, options(), h);
  ASSERT_TRUE(m.recover());
  ASSERT_TRUE(m.reconcile_once());
  EXPECT_EQ(node_label(kMigConfigStateLabel), "success") << m.last_outcome().reason;
  EXPECT_TRUE(seen_during_apply) << "kubelet never saw GPUs 1 and 3 alone Unhealthy";
  EXPECT_TRUE(kubelet.wait_update(
      ep, [&](const auto& r) { return all_eight(r) && unhealthy(r).empty(); },
      std::chrono::seconds(30)))
      << "every GPU Healthy after the apply";
  // Throughout: no response listed fewer GPUs or an untouched GPU not Healthy.
  auto updates = kubelet.updates(ep);
  ASSERT_GT(updates.size(), before_apply);
  size_t withdrawn_responses = 0;
  for (size_t i = before_apply; i < updates.size(); ++i) {
    EXPECT_TRUE(all_eight(updates[i])) << "response " << i;
    auto bad = unhealthy(updates[i]);
    for (const auto& id : bad)
      EXPECT_TRUE(changing.count(id)) << "untouched GPU " << id << " Unhealthy in response " << i;
    if (bad == changing) ++withdrawn_responses;
  }
  EXPECT_GE(withdrawn_responses, 1u);
  EXPECT_EQ(kubelet.registrations("nvidia.com/gpu"), 1u);
  runner.stop();
  monitor.stop();
}

// ---- The DRA driver's ResourceSlices during an apply (issue 43, 4) --------------------------

// Polls `pred` every 20 ms until it holds or `timeout` passes; its last answer.
template <class Pred>
bool wait_until(Pred pred, std::chrono::milliseconds timeout) {
  for (auto deadline = std::chrono::steady_clock::now() + timeout;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// The profiles of the MIG devices the stored slices offer (untainted) on each GPU, by bus id;
// "whole" for a GPU's own device. Under server.mu.
std::map<std::string, std::multiset<std::string>> offered(const FakeApiServer& server) {
  std::map<std::string, std::multiset<std::string>> out;
  for (const auto& [name, s] : server.slices) {
    if (!s["spec"].contains("devices") || !s["spec"]["devices"].is_array()) continue;
    for (const auto& d : s["spec"]["devices"]) {
      if (d.contains("taints") && !d["taints"].empty()) continue;
      const json a = d.value("attributes", json::object());
      auto bus = a.find("resource.kubernetes.io/pciBusID");
      if (bus == a.end()) continue;
      auto profile = a.find("migProfile");
      out[bus->value("string", "")].insert(profile == a.end() ? "whole"
                                                              : profile->value("string", ""));
    }
  }
  return out;
}

// The agent's DRA driver on the 8xH200 test NVML, its monitor rescanning as in production (every
// 60 s), wired to the manager as `polyaccel agent --dra --mig-manager` does (agent_partition.cc):
// a GPU given back is listed again first, and `publish` waits for the API server.
struct DraAgent {
  DraAgent(const FakeApiServer& server, const std::filesystem::path& dir) {
    ::setenv("POLYACCEL_ROCM_SMI_LIB", "/nonexistent/librocm_smi64.so.1", 1);
    ::setenv("POLYACCEL_HLML_LIB", "/nonexistent/libhlml.so", 1);
    DiscoverOptions discover;
    discover.topology_xml =
        polyaccel::testing::topology_fixture(polyaccel::testing::kXe8640).string();
    auto host = discover_host(discover);
    EXPECT_TRUE(host) << host.error().message();
    MonitorOptions mo;
    mo.interval = std::chrono::milliseconds(100);
    monitor =
        std::make_unique<AcceleratorMonitor>(host ? *host : HostModel{}, make_all_backends(), mo);
    monitor->start();
    dra::DraRunnerOptions ro;
    ro.slices.node = kNode;
    ro.plugin.plugin_dir = (dir / "plugins/polyaccel.io").string();
    ro.plugin.registry_dir = (dir / "plugins_registry").string();
    ro.plugin.cdi_dir = (dir / "cdi").string();
    ro.plugin.log = [](const std::string&) {};
    ro.root = "";
    ro.log = [](const std::string&) {};
    kube_api::KubeConfig kc;
    kc.server = server.url();
    kc.token = "test-token";
    runner =
        std::make_unique<dra::DraRunner>(*monitor, ro, std::make_unique<kube_api::KubeClient>(kc));
  }
  ~DraAgent() {
    runner->stop();
    monitor->stop();
  }
  void wire(PartitionManagerHooks& h) {
    auto record = h.withdraw;
    h.withdraw = [this, record](const std::set<std::string>& gpus) {
      record(gpus);
      bool given_back = false;
      for (const auto& g : withdrawn)
        given_back = given_back || !gpus.count(g);
      withdrawn = gpus;
      if (given_back) {
        EXPECT_TRUE(monitor->rescan_now(std::chrono::seconds(30)));
      }
      runner->set_withdrawn(gpus);
    };
    h.publish = [this](std::chrono::milliseconds timeout) { return runner->publish_now(timeout); };
  }
  std::set<std::string> withdrawn;
  std::unique_ptr<AcceleratorMonitor> monitor;
  std::unique_ptr<dra::DraRunner> runner;
};

TEST_F(MigLabels, TheDraSlicesDropTheGpusBeforeTheChangeAndOfferTheNewLayoutAtSuccess) {
  using Clock = std::chrono::steady_clock;
  const std::multiset<std::string> old_gpu1 = {"3g.71gb", "1g.18gb", "1g.18gb", "1g.18gb",
                                               "1g.18gb"};
  const std::multiset<std::string> new_gpu1 = {"1g.18gb", "1g.18gb", "1g.18gb", "1g.18gb",
                                               "1g.18gb", "1g.18gb", "1g.18gb"};
  const std::multiset<std::string> new_gpu3 = {"1g.18gb", "1g.18gb", "2g.35gb", "3g.71gb"};
  DraAgent agent(server_, dir_.path());
  ASSERT_TRUE(agent.runner->start(std::chrono::seconds(60)));
  ASSERT_TRUE(wait_until(
      [&] {
        std::lock_guard<std::mutex> lock(server_.mu);
        auto o = offered(server_);
        return o[kBus[1]] == old_gpu1;
      },
      std::chrono::seconds(30)))
      << "GPU 1's instances are offered before the apply";

  // From here on the server takes as long as a real one to store a write; what it stored is
  // recorded, in order, with the label writes and the steps of the apply.
  struct Entry {
    std::string what;
    std::multiset<std::string> gpu1, gpu3;  // offered by the stored slices then
    Clock::time_point at;
  };
  std::vector<Entry> timeline;  // under server_.mu
  auto note = [&](const std::string& what) {
    auto o = offered(server_);
    timeline.push_back({what, o[kBus[1]], o[kBus[3]], Clock::now()});
  };
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.write_latency = std::chrono::milliseconds(100);
    server_.on_stored = [&](const std::string& what) {
      note(what == "labels" ? "state=" + server_.label_patches.back().value(kMigConfigStateLabel,
                                                                            std::string("?"))
                            : what);
    };
  }
  PartitionManagerHooks h = hooks();
  agent.wire(h);
  h.after_step = [&](ApplyStep s) {
    std::lock_guard<std::mutex> lock(server_.mu);
    if (s == ApplyStep::pods_gone) note("first MIG change");
    return true;
  };
  label("two-change");
  PartitionLabelManager m(*client_, options(), h);
  ASSERT_TRUE(m.recover());
  ASSERT_TRUE(m.reconcile_once());
  ASSERT_EQ(node_label(kMigConfigStateLabel), "success") << m.last_outcome().reason;
  EXPECT_EQ(layouts()[1], "on: 19@0 19@1 19@2 19@3 19@4 19@5 19@6");

  std::lock_guard<std::mutex> lock(server_.mu);
  std::string story;
  for (const auto& e : timeline)
    story += e.what + " (GPU 1 offers " + std::to_string(e.gpu1.size()) + ", GPU 3 " +
             std::to_string(e.gpu3.size()) + "); ";
  auto at = [&](const std::string& what) {
    return std::find_if(timeline.begin(), timeline.end(),
                        [&](const Entry& e) { return e.what == what; });
  };
  auto change = at("first MIG change"), success = at("state=success");
  ASSERT_NE(change, timeline.end()) << story;
  ASSERT_NE(success, timeline.end()) << story;
  // The GPUs left the stored slices (or are tainted) before the first change was made.
  EXPECT_TRUE(change->gpu1.empty() && change->gpu3.empty()) << story;
  // The new layouts are stored when the state says success; nothing of the old one after the
  // first change.
  EXPECT_EQ(success->gpu1, new_gpu1) << story;
  EXPECT_EQ(success->gpu3, new_gpu3) << story;
  for (auto e = change; e != timeline.end(); ++e)
    EXPECT_FALSE(e->gpu1.count("3g.71gb")) << "GPU 1's old 3g.71gb offered at " << e->what;
  // The measure: from the success label to the first stored slice with the new layout
  // (negative: before it). With today's code this waits for the monitor's next rescan.
  server_.on_stored = nullptr;
  server_.mu.unlock();
  bool stored = wait_until(
      [&] {
        std::lock_guard<std::mutex> l(server_.mu);
        return offered(server_)[kBus[1]] == new_gpu1;
      },
      std::chrono::seconds(90));
  const auto seen_at = Clock::now();
  server_.mu.lock();
  auto first_new = std::find_if(timeline.begin(), timeline.end(), [&](const Entry& e) {
    return e.what == "slice" && e.gpu1 == new_gpu1;
  });
  auto new_at = first_new != timeline.end() ? first_new->at : seen_at;
  std::cout << "success label -> new layout stored: "
            << std::chrono::duration_cast<std::chrono::milliseconds>(new_at - success->at).count()
            << " ms (" << (stored ? "stored" : "never stored") << ")\n";
}

TEST_F(MigLabels, AServerThatDoesNotStoreTheWithdrawalFailsTheApplyWithNothingChanged) {
  DraAgent agent(server_, dir_.path());
  ASSERT_TRUE(agent.runner->start(std::chrono::seconds(60)));
  ASSERT_TRUE(wait_until(
      [&] {
        std::lock_guard<std::mutex> lock(server_.mu);
        return !offered(server_)[kBus[1]].empty();
      },
      std::chrono::seconds(30)));
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.forbid_writes = true;  // ResourceSlices refused (403), Node labels still taken
  }
  const auto before = layouts();
  PartitionManagerHooks h = hooks();
  agent.wire(h);
  PartitionManagerOptions o = options();
  o.publish_wait = std::chrono::milliseconds(1500);
  label("two-change");
  PartitionLabelManager m(*client_, o, h);
  ASSERT_TRUE(m.recover());
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(m.reconcile_once());
  // Bounded: one wait for the withdrawal, one for giving the GPUs back.
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
  EXPECT_EQ(node_label(kMigConfigStateLabel), "failed");
  const std::string reason = m.last_outcome().reason;
  for (const char* part : {"cannot withdraw the GPUs", "403", "nothing was changed"})
    EXPECT_NE(reason.find(part), std::string::npos) << part << " in: " << reason;
  EXPECT_EQ(layouts(), before) << "no GPU changed";
  EXPECT_TRUE(m.withdrawn().empty()) << "nothing changed: the GPUs are offered again";
}

TEST_F(MigLabels, AfterAKillTheRestartedAgentWithdrawsTheHalfChangedGpusFromTheSlicesOnRecover) {
  label("two-change");
  {
    DraAgent agent(server_, dir_.path());
    ASSERT_TRUE(agent.runner->start(std::chrono::seconds(60)));
    PartitionManagerHooks h = hooks();
    agent.wire(h);
    h.after_step = [](ApplyStep s) { return s != ApplyStep::gpu_applied; };
    PartitionLabelManager killed(*client_, options(), h);
    ASSERT_TRUE(killed.recover());
    ASSERT_TRUE(killed.reconcile_once());
  }
  // The agent again: its DRA driver publishes every GPU at first.
  DraAgent agent(server_, dir_.path());
  ASSERT_TRUE(agent.runner->start(std::chrono::seconds(60)));
  ASSERT_TRUE(wait_until(
      [&] {
        std::lock_guard<std::mutex> lock(server_.mu);
        return !offered(server_)[kBus[1]].empty();
      },
      std::chrono::seconds(30)));
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.write_latency = std::chrono::milliseconds(100);
  }
  PartitionManagerHooks h = hooks();
  agent.wire(h);
  PartitionLabelManager restarted(*client_, options(), h);
  ASSERT_TRUE(restarted.recover());
  // When recover returns, the stored slices offer nothing of the half-changed GPUs.
  std::lock_guard<std::mutex> lock(server_.mu);
  auto o = offered(server_);
  EXPECT_TRUE(o[kBus[1]].empty()) << o[kBus[1]].size() << " devices of GPU 1 offered";
  EXPECT_TRUE(o[kBus[3]].empty()) << o[kBus[3]].size() << " devices of GPU 3 offered";
}

// ---- AMD: dcm.amd.com/gpu-config-profile over amdgpu's sysfs attributes --------------------

const std::string kAmdConfig = R"({
  "gpu-config-profiles": {
    "half-cpx": {"skippedGPUs": {"ids": [4, 5, 6, 7]},
                 "profiles": [{"computePartition": "CPX", "memoryPartition": "NPS4",
                               "numGPUsAssigned": 4}]},
    "all-spx": {"profiles": [{"computePartition": "SPX", "memoryPartition": "NPS1",
                              "numGPUsAssigned": 8}]},
    "miscounted": {"profiles": [{"computePartition": "CPX", "memoryPartition": "NPS1",
                                 "numGPUsAssigned": 5}]},
    "nps2": {"profiles": [{"computePartition": "DPX", "memoryPartition": "NPS2",
                           "numGPUsAssigned": 8}]}
  },
  "gpuClientSystemdServices": {"names": ["amd-metrics-exporter"]}
})";

class AmdPartitionLabels : public ::testing::Test {
 protected:
  AmdPartitionLabels() : server_(dir_.path()) {
    ::setenv("POLYACCEL_LOCK_DIR", dir_.path().c_str(), 1);
    for (unsigned i = 0; i < 8; ++i) {
      char bdf[16];
      std::snprintf(bdf, sizeof bdf, "0000:%02x:00.0", 0x10 * (i + 1));
      buses_.push_back(bdf);
      auto d = dir_.path() / "sys/bus/pci/devices" / bdf;
      std::filesystem::create_directories(d);
      polyaccel::testing::write_text(d / "vendor", "0x1002\n");
      polyaccel::testing::write_text(d / "current_compute_partition", "SPX\n");
      polyaccel::testing::write_text(d / "current_memory_partition", "NPS1\n");
      polyaccel::testing::write_text(d / "available_compute_partition", "SPX, DPX, QPX, CPX\n");
      polyaccel::testing::write_text(d / "available_memory_partition", "NPS1, NPS4\n");
    }
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.nodes["mi300x-node"] = {
        {"apiVersion", "v1"},
        {"kind", "Node"},
        {"metadata", {{"name", "mi300x-node"}, {"labels", json::object()}}}};
    server_.config_maps["polyaccel-system/config-manager-config"] = {
        {"apiVersion", "v1"},
        {"kind", "ConfigMap"},
        {"metadata", {{"name", "config-manager-config"}, {"namespace", "polyaccel-system"}}},
        {"data", {{"config.json", kAmdConfig}}}};
    kube_api::KubeConfig c;
    c.server = server_.url();
    c.token = "test-token";
    client_ = std::make_unique<kube_api::KubeClient>(c);
  }
  ~AmdPartitionLabels() override {
    std::lock_guard<std::mutex> lock(server_.mu);
    EXPECT_TRUE(server_.schema_errors.empty()) << server_.schema_errors.front();
  }
  void label(const std::string& profile) {
    std::lock_guard<std::mutex> lock(server_.mu);
    server_.nodes["mi300x-node"]["metadata"]["labels"][kAmdConfigProfileLabel] = profile;
  }
  std::string state() {
    std::lock_guard<std::mutex> lock(server_.mu);
    return server_.nodes["mi300x-node"]["metadata"]["labels"].value(kAmdConfigProfileStateLabel,
                                                                    "");
  }
  std::string event_message() {
    std::lock_guard<std::mutex> lock(server_.mu);
    return server_.events.empty() ? "" : server_.events.back()["message"].get<std::string>();
  }
  // "SPX/NPS1" of each GPU.
  std::vector<std::string> modes() {
    std::vector<std::string> out;
    for (const auto& b : buses_) {
      auto d = dir_.path() / "sys/bus/pci/devices" / b;
      out.push_back(*read_first_line(d / "current_compute_partition") + "/" +
                    *read_first_line(d / "current_memory_partition"));
    }
    return out;
  }
  PartitionManagerOptions options() {
    PartitionManagerOptions o = amd_partition_manager_options();
    o.node = "mi300x-node";
    o.state_file = dir_.path() / "amd-partition-manager.json";
    o.log = [](const std::string&) {};
    return o;
  }
  PartitionManagerHooks hooks() {
    PartitionManagerHooks h;
    h.workflow = amd_partition_workflow(dir_.path() / "sys");
    h.withdraw = [this](const std::set<std::string>& gpus) {
      ever_withdrawn_.insert(gpus.begin(), gpus.end());
    };
    return h;
  }

  TempDir dir_;
  FakeApiServer server_;
  std::unique_ptr<kube_api::KubeClient> client_;
  std::vector<std::string> buses_;
  std::set<std::string> ever_withdrawn_;
};

TEST_F(AmdPartitionLabels, AProfileLabelSetsThePartitionsOfItsGpusOnly) {
  label("half-cpx");
  PartitionLabelManager m(*client_, options(), hooks());
  ASSERT_TRUE(m.recover());
  ASSERT_TRUE(m.reconcile_once());
  EXPECT_EQ(state(), "success") << m.last_outcome().reason;
  auto now = modes();
  for (unsigned i = 0; i < 8; ++i)
    EXPECT_EQ(now[i], i < 4 ? "CPX/NPS4" : "SPX/NPS1") << "GPU " << i;
  EXPECT_EQ(ever_withdrawn_, (std::set<std::string>{buses_[0], buses_[1], buses_[2], buses_[3]}))
      << "the skipped GPUs keep serving";
  EXPECT_TRUE(m.withdrawn().empty());
  {
    std::lock_guard<std::mutex> lock(server_.mu);
    ASSERT_EQ(server_.events.size(), 1u);
    EXPECT_EQ(server_.events[0]["reason"], "GpuPartitionProfileApplied");
  }
  // Back to SPX: the four that are CPX change, the others are SPX already.
  ever_withdrawn_.clear();
  label("all-spx");
  ASSERT_TRUE(m.reconcile_once());
  EXPECT_EQ(state(), "success");
  for (const auto& mode : modes())
    EXPECT_EQ(mode, "SPX/NPS1");
  EXPECT_EQ(ever_withdrawn_.size(), 4u);
}

TEST_F(AmdPartitionLabels, BadProfilesAreAFailureThatChangesNothing) {
  auto before = modes();
  for (const auto& [profile, reason] : std::vector<std::pair<std::string, std::string>>{
           {"no-such", "no such profile"},
           {"miscounted", "assigns 5 GPUs and skips 0 on a node with 8"},
           {"nps2", "NPS2: not offered by"}}) {
    std::filesystem::remove(options().state_file);
    label(profile);
    PartitionLabelManager m(*client_, options(), hooks());
    ASSERT_TRUE(m.recover());
    ASSERT_TRUE(m.reconcile_once());
    EXPECT_EQ(state(), "failure") << profile;
    EXPECT_NE(event_message().find(reason), std::string::npos) << event_message();
    EXPECT_EQ(modes(), before) << profile;
    EXPECT_TRUE(ever_withdrawn_.empty()) << profile;
  }
}

TEST_F(AmdPartitionLabels, AKillBetweenGpusThenARestartFinishes) {
  label("half-cpx");
  {
    PartitionManagerHooks h = hooks();
    h.after_step = [](ApplyStep s) { return s != ApplyStep::gpu_applied; };
    PartitionLabelManager killed(*client_, options(), h);
    ASSERT_TRUE(killed.recover());
    ASSERT_TRUE(killed.reconcile_once());
  }
  auto half = modes();
  EXPECT_EQ(half[0], "CPX/NPS4");
  EXPECT_EQ(half[1], "SPX/NPS1") << "killed after the first GPU";
  PartitionLabelManager restarted(*client_, options(), hooks());
  ASSERT_TRUE(restarted.recover());
  EXPECT_EQ(restarted.withdrawn().size(), 4u);
  ASSERT_TRUE(restarted.reconcile_once());
  EXPECT_EQ(state(), "success");
  for (unsigned i = 0; i < 4; ++i)
    EXPECT_EQ(modes()[i], "CPX/NPS4");
}

TEST(PartitionApplyRecord, ParsesWhatItWritesAndRefusesTheRest) {
  TempDir dir;
  PartitionApplyRecord r{
      "nvidia.com/mig.config", "all-1g.18gb", ApplyPhase::applying, {"0000:18:00.0"}, ""};
  auto path = dir.path() / "state.json";
  ASSERT_TRUE(write_partition_apply_record(path, r));
  auto back = read_partition_apply_record(path);
  ASSERT_TRUE(back && *back);
  EXPECT_EQ((*back)->config, "all-1g.18gb");
  EXPECT_EQ((*back)->phase, ApplyPhase::applying);
  EXPECT_EQ((*back)->gpus, r.gpus);
  auto absent = read_partition_apply_record(dir.path() / "none.json");
  ASSERT_TRUE(absent);
  EXPECT_FALSE(*absent);
  for (const char* bad :
       {"[]", "{\"schema_version\": 2}",
        R"({"schema_version":1,"label":"l","config":"c","phase":"half","gpus":[],"reason":""})",
        R"({"schema_version":1,"label":"l","config":"c","phase":"done","gpus":["x"],"reason":""})",
        R"({"schema_version":1,"label":"l","config":7,"phase":"done","gpus":[],"reason":""})"}) {
    auto p = parse_partition_apply_record(bad, "state.json");
    ASSERT_FALSE(p) << bad;
    EXPECT_EQ(p.error().code, ErrorCode::bad_input);
    EXPECT_NE(p.error().message().find("state.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace polyaccel
