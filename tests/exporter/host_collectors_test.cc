// The placement-state and audit-findings collectors on the captured NEC host (2 NUMA nodes,
// 2 MiB hugepages on node 1): a state file the test commits through the real allocation store,
// an absent and a broken one, and audits of the captured tree before and after the test changes
// its tuning, compared with what `polyaccel audit --json` says of the same tree.
#include <cctype>
#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "audit/audit.h"
#include "discover/discover.h"
#include "exporter/exporter.h"
#include "exporter/families.h"
#include "exporter/family_values.h"
#include "exporter/host_sampler.h"
#include "place/allocation_store.h"
#include "place/host_view.h"
#include "support/test_support.h"

namespace polyaccel::exporter {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class HostCollectors : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = polyaccel::testing::extract_tarball(
        polyaccel::testing::topology_fixture(
            "sysfs_2socket-2numa-8xNEC-VE-2xIB-pcieswitch-hugepages.tar.bz2"),
        tmp_.path());
    DiscoverOptions o;
    o.fsroot = root_.string();
    o.backends = BackendMode::off;
    auto m = discover_host(o);
    ASSERT_TRUE(m) << m.error().message();
    model_ = *m;
    state_ = tmp_.path() / "state" / "allocations.json";
  }

  // A scrape of every collector over a host sample with the given extras.
  Families scrape(const HostSamplerExtras& extras) {
    HostSampler sampler(model_, root_.string(), 1h);
    sampler.set_extras(extras);
    sampler.start();  // takes the first sample before it returns
    auto host = sampler.snapshot();
    sampler.stop();
    Sources sources{[] { return std::make_shared<const AcceleratorSnapshot>(); },
                    [host] { return host; }, nullptr};
    Scraper scraper(make_all_collectors(), ExporterOptions{}, sources);
    return scraper.scrape();
  }

  // A guest pinned to node 1: 4 PUs, 2 GiB on 2 MiB pages, one device.
  place::Placement guest_on_node1(const place::HostView& view) {
    const place::HostCell* cell = view.cell(1);
    EXPECT_NE(cell, nullptr);
    place::Placement p;
    p.name = "vm-a";
    p.vcpus = 4;
    p.memory_bytes = 2ull << 30;
    p.cpu_policy = place::CpuPolicy::dedicated;
    place::CellPlacement c;
    c.host_numa_node = 1;
    auto pus = cell->pcpus.to_vector();
    for (unsigned v = 0; v < 4; ++v) {
      c.vcpus.push_back(v);
      c.pinning.push_back({v, pus[v]});
      p.held_pus.set(pus[v]);
    }
    c.memory_bytes = p.memory_bytes;
    c.page_size_bytes = 2ull << 20;
    p.cells.push_back(c);
    p.emulator_pus = p.held_pus;
    // This capture's devices are all local to node 0; passthrough does not require locality.
    EXPECT_FALSE(view.devices.empty());
    if (!view.devices.empty()) {
      const place::HostDevice& d = view.devices.back();
      p.devices.push_back(
          {d.pci_bus_id, d.numa_node, d.accelerator ? "accelerator" : "nic", d.id, "dev", 0});
      held_device_ = d.pci_bus_id;
    }
    return p;
  }

  polyaccel::testing::TempDir tmp_;
  fs::path root_, state_;
  HostModel model_;
  std::string held_device_;
};

// numastat counters past 64 bits or negative are no reading: istream's >> took "-1" for 2^64-1.
TEST_F(HostCollectors, NumastatCountersOutOfRangeAreNoReading) {
  std::ofstream(root_ / "sys/devices/system/node/node0/numastat")
      << "numa_hit 1000\nnuma_miss -1\nnuma_foreign 18446744073709551616\nlocal_node 7\n";
  auto sample = read_host_sample(model_, root_.string());
  ASSERT_FALSE(sample.numa.empty());
  ASSERT_EQ(sample.numa[0].node, 0u);
  EXPECT_EQ(sample.numa[0].numastat,
            (std::map<std::string, std::uint64_t>{{"numa_hit", 1000}, {"local_node", 7}}));
}

TEST_F(HostCollectors, AbsentStateIsNothingAllocated) {
  auto f = scrape({state_.string(), 0ms, nullptr, nullptr});
  EXPECT_EQ(value(f, "polyaccel_collector_success", {{"collector", "placement"}}), 1.0);
  EXPECT_EQ(value(f, "polyaccel_placement_allocations", {}), 0.0);
  auto view = place::build_host_view(model_, {});
  ASSERT_TRUE(view);
  for (const auto& cell : view->cells) {
    Labels node = {{"numa_node", std::to_string(cell.node)}};
    EXPECT_EQ(value(f, "polyaccel_placement_pinned_pus", node), 0.0);
    EXPECT_EQ(value(f, "polyaccel_placement_free_pus", node), cell.pcpus.count());
  }
  EXPECT_EQ(count(f, "polyaccel_placement_device_held"), view->devices.size());
  EXPECT_FALSE(fs::exists(state_));                     // read only: nothing created
  EXPECT_EQ(count(f, "polyaccel_audit_findings"), 0u);  // --audit-interval off: no audit
}

// A guest libvirt runs on the host (its status file under the sampler's root, as libvirtd keeps
// it in /run/libvirt/qemu) counts as a placement without any state file.
TEST_F(HostCollectors, RunningLibvirtGuestCountsWithoutAStateFile) {
  auto view = place::build_host_view(model_, {});
  ASSERT_TRUE(view);
  const auto pus = view->cell(0)->pcpus.to_vector();
  ASSERT_GE(pus.size(), 2u);
  polyaccel::testing::write_text(
      root_ / "run/libvirt/qemu/instance-00000001.xml",
      "<domstatus state='running'><domain type='kvm'><name>instance-00000001</name>"
      "<memory unit='GiB'>1</memory><vcpu>2</vcpu><cputune>"
      "<vcpupin vcpu='0' cpuset='" +
          std::to_string(pus[0]) +
          "'/>"
          "<vcpupin vcpu='1' cpuset='" +
          std::to_string(pus[1]) +
          "'/></cputune>"
          "<numatune><memory mode='strict' nodeset='0'/></numatune></domain></domstatus>");
  auto f = scrape({state_.string(), 0ms, nullptr, nullptr});
  EXPECT_EQ(value(f, "polyaccel_collector_success", {{"collector", "placement"}}), 1.0);
  EXPECT_EQ(value(f, "polyaccel_placement_allocations", {}), 1.0);
  EXPECT_EQ(value(f, "polyaccel_placement_pinned_pus", {{"numa_node", "0"}}), 2.0);
  EXPECT_EQ(value(f, "polyaccel_placement_memory_bytes", {{"numa_node", "0"}}), double(1ull << 30));
  EXPECT_FALSE(fs::exists(state_));  // read only: nothing created
}

TEST_F(HostCollectors, CommittedPlacementShowsPinnedPusPagesAndDevice) {
  auto view = place::build_host_view(model_, {});
  ASSERT_TRUE(view);
  place::AllocationStore store(state_);
  ASSERT_TRUE(store.update([&](place::AllocationState& s) -> Result<bool> {
    s.host = model_.hostname;
    s.placements.push_back(guest_on_node1(*view));
    return true;
  }));
  ASSERT_FALSE(held_device_.empty());

  auto f = scrape({state_.string(), 0ms, nullptr, nullptr});
  EXPECT_EQ(value(f, "polyaccel_collector_success", {{"collector", "placement"}}), 1.0);
  EXPECT_EQ(value(f, "polyaccel_placement_allocations", {}), 1.0);
  unsigned node1_pus = view->cell(1)->pcpus.count();
  EXPECT_EQ(value(f, "polyaccel_placement_pinned_pus", {{"numa_node", "1"}}), 4.0);
  EXPECT_EQ(value(f, "polyaccel_placement_free_pus", {{"numa_node", "1"}}), node1_pus - 4.0);
  EXPECT_EQ(value(f, "polyaccel_placement_pinned_pus", {{"numa_node", "0"}}), 0.0);
  EXPECT_EQ(value(f, "polyaccel_placement_memory_bytes", {{"numa_node", "1"}}), double(2ull << 30));
  EXPECT_EQ(value(f, "polyaccel_placement_hugepages_held_pages",
                  {{"numa_node", "1"}, {"page_size_bytes", "2097152"}}),
            1024.0);
  EXPECT_EQ(value(f, "polyaccel_placement_hugepages_held_pages",
                  {{"numa_node", "0"}, {"page_size_bytes", "2097152"}}),
            0.0);
  EXPECT_EQ(value(f, "polyaccel_placement_device_held", {{"pci_bus_id", held_device_}}), 1.0);
  double held = 0;
  for (const auto& fam : f) {
    if (fam.name != "polyaccel_placement_device_held") continue;
    for (const auto& m : fam.metric)
      held += m.gauge.value;
  }
  EXPECT_EQ(held, 1.0);
}

TEST_F(HostCollectors, BrokenStateIsCollectorFailureAndTheRestGoOn) {
  fs::create_directories(state_.parent_path());
  std::ofstream(state_) << "{\"schema\": \"polyaccel-allocations\", \"schema_version\": 1, ";
  auto f = scrape({state_.string(), 0ms, nullptr, nullptr});
  EXPECT_EQ(value(f, "polyaccel_collector_success", {{"collector", "placement"}}), 0.0);
  EXPECT_EQ(count(f, "polyaccel_placement_pinned_pus"), 0u);
  EXPECT_EQ(value(f, "polyaccel_collector_success", {{"collector", "hugepages"}}), 1.0);
  EXPECT_GT(count(f, "polyaccel_hugepages_pages"), 0u);
}

// Counts per id and severity from `polyaccel audit --json` on the same tree.
std::map<std::pair<std::string, std::string>, int> cli_audit(const fs::path& root) {
  auto r = polyaccel::testing::run_command("'" + polyaccel::testing::polyaccel_binary() +
                                           "' audit --json --accel-backends off --root '" +
                                           root.string() + "' 2>/dev/null");
  std::map<std::pair<std::string, std::string>, int> out;
  auto j = nlohmann::json::parse(r.output, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.output;
  if (j.is_discarded()) return out;
  for (const auto& f : j["findings"])
    ++out[{f["id"].get<std::string>(), f["severity"].get<std::string>()}];
  return out;
}

// The check ids `polyaccel audit --json` on the same tree could not run.
std::set<std::string> cli_unchecked(const fs::path& root) {
  auto r = polyaccel::testing::run_command("'" + polyaccel::testing::polyaccel_binary() +
                                           "' audit --json --accel-backends off --root '" +
                                           root.string() + "' 2>/dev/null");
  std::set<std::string> out;
  auto j = nlohmann::json::parse(r.output, nullptr, false);
  if (j.is_discarded()) return out;
  for (const auto& u : j["checks"]["unchecked"])
    out.insert(u["id"].get<std::string>());
  return out;
}

void expect_gauges_match(const Families& f, const fs::path& root) {
  auto want = cli_audit(root);
  // issue 32: which checks ran, as the command says it (a check that could not run is 0).
  auto unchecked = cli_unchecked(root);
  for (const auto& id : all_finding_ids()) {
    if (id == "audit.limits") continue;
    EXPECT_EQ(value(f, "polyaccel_audit_check_ran", {{"id", id}}), unchecked.count(id) ? 0 : 1)
        << id;
  }
  size_t ids = all_finding_ids().size();
  EXPECT_EQ(count(f, "polyaccel_audit_findings"), ids * 3);  // every id, every severity
  for (const auto& id : all_finding_ids()) {
    for (std::string sev : {"critical", "warning", "info"}) {
      auto it = want.find({id, sev});
      EXPECT_EQ(value(f, "polyaccel_audit_findings", {{"id", id}, {"severity", sev}}),
                it == want.end() ? 0 : it->second)
          << id << " " << sev;
    }
  }
}

TEST_F(HostCollectors, AuditFindingsPerIdMatchTheAuditCommand) {
  auto before = scrape({"", 1h, nullptr, nullptr});
  EXPECT_EQ(value(before, "polyaccel_collector_success", {{"collector", "audit"}}), 1.0);
  EXPECT_EQ(count(before, "polyaccel_placement_allocations"), 0u);  // no --state: none
  EXPECT_GT(value(before, "polyaccel_audit_last_run_timestamp_seconds", {}).value_or(0), 0);
  expect_gauges_match(before, root_);
  EXPECT_EQ(value(before, "polyaccel_audit_findings", {{"id", "cpu.governor"}}), 0.0);

  // A power-saving governor on the CPUs that feed the accelerators: a warning appears.
  for (const auto& e : fs::directory_iterator(root_ / "sys/devices/system/cpu")) {
    std::string name = e.path().filename();
    if (name.rfind("cpu", 0) != 0 || name.size() < 4 || !std::isdigit(name[3])) continue;
    fs::create_directories(e.path() / "cpufreq");
    std::ofstream(e.path() / "cpufreq/scaling_governor") << "powersave\n";
  }
  auto after = scrape({"", 1h, nullptr, nullptr});
  expect_gauges_match(after, root_);
  EXPECT_EQ(
      value(after, "polyaccel_audit_findings", {{"id", "cpu.governor"}, {"severity", "warning"}}),
      1.0);
}

TEST_F(HostCollectors, AuditRunsAtItsOwnIntervalNotEverySample) {
  HostSampler sampler(model_, root_.string(), 10ms);
  sampler.set_extras({"", 1h, nullptr, nullptr});
  sampler.start();
  auto first = sampler.snapshot();
  ASSERT_NE(first->audit->time.time_since_epoch().count(), 0);
  // Wait (bounded) for later host samples: they carry the same audit run.
  auto deadline = std::chrono::steady_clock::now() + 30s;
  auto later = sampler.snapshot();
  while (later->time == first->time && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
    later = sampler.snapshot();
  }
  sampler.stop();
  EXPECT_NE(later->time, first->time);
  EXPECT_EQ(later->audit.get(), first->audit.get());
}

}  // namespace
}  // namespace polyaccel::exporter
