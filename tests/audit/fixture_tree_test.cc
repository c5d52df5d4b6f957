// The audit on a real gathered machine (../shared/fixtures/topologies, the 8× NEC Vector Engine
// host): as captured, and with its own sysfs files changed the way a misconfigured host shows
// them, then changed back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "audit/audit.h"
#include "audit/fake_host.h"
#include "discover/discover.h"

namespace polyaccel {
namespace {

using polyaccel::testing::topology_fixture;
using ::testing::HasSubstr;

class NecTree : public polyaccel::testing::NecTreeTest {
 protected:
  void SetUp() override { root_ = tree_root(); }
  void write(const std::string& relative, const std::string& content) {
    write_tree(relative, content);
  }
  std::vector<Finding> audit(HostRole role = HostRole::compute) {
    DiscoverOptions o;
    o.fsroot = root_.string();
    auto m = discover_host(o);
    EXPECT_TRUE(m) << (m ? "" : m.error().message());
    if (!m) return {};
    TuningFacts facts = read_tuning_facts(root_.string());
    std::vector<AcceleratorSample> none;
    AuditIntent intent;
    intent.role = role;
    return run_audit({*m, facts, none, intent});
  }
  static std::vector<Finding> with_id(const std::vector<Finding>& all, const std::string& id) {
    std::vector<Finding> out;
    std::copy_if(all.begin(), all.end(), std::back_inserter(out),
                 [&](const Finding& f) { return f.id == id; });
    return out;
  }

  std::filesystem::path root_;
};

TEST_F(NecTree, AsCapturedOnlyTheAuditsOwnLimits) {
  auto all = audit();
  ASSERT_EQ(all.size(), 1u) << all.front().id << " " << all.front().observed;
  EXPECT_EQ(all[0].id, "audit.limits");
  EXPECT_EQ(all[0].subject, "pcie.acs-redirect");
  // The X722 at 2.5 GT/s x1 sits on a 2.5 GT/s port: not degraded.
  EXPECT_TRUE(with_id(all, "pcie.link-degraded").empty());
}

TEST_F(NecTree, ANarrowLinkIsDegradedAnIdleSlowOneIsInformation) {
  const std::string hca = "sys/bus/pci/devices/0000:1a:00.0/";
  const std::string ve = "sys/bus/pci/devices/0000:1b:00.0/";
  write(hca + "current_link_width", "8\n");
  write(ve + "current_link_speed", "2.5 GT/s\n");
  auto f = with_id(audit(), "pcie.link-degraded");
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].severity, Severity::warning);
  EXPECT_EQ(f[0].subject, "0000:1a:00.0 (nic0)");
  EXPECT_EQ(f[0].observed, "link 8 GT/s x8");
  EXPECT_EQ(f[0].expected, "8 GT/s x16");
  EXPECT_EQ(f[1].severity, Severity::info);
  EXPECT_EQ(f[1].subject, "0000:1b:00.0 (gpu0)");
  EXPECT_EQ(f[1].observed, "link 2.5 GT/s x16 while idle");

  write(hca + "current_link_width", "16\n");
  write(ve + "current_link_speed", "8 GT/s\n");
  EXPECT_TRUE(with_id(audit(), "pcie.link-degraded").empty());
}

TEST_F(NecTree, HugepagesTakenFromOneNodeOfAHypervisor) {
  const std::string node1 = "sys/devices/system/node/node1/hugepages/hugepages-2048kB/";
  write(node1 + "nr_hugepages", "0\n");
  write(node1 + "free_hugepages", "0\n");
  auto f = with_id(audit(HostRole::hypervisor), "hugepages.reserved");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].subject, "node1");
  EXPECT_EQ(f[0].remedy.runtime[0].value, "2048");
  EXPECT_TRUE(with_id(audit(HostRole::compute), "hugepages.reserved").empty());
  write(node1 + "nr_hugepages", "2048\n");
  EXPECT_TRUE(with_id(audit(HostRole::hypervisor), "hugepages.reserved").empty());
}

TEST_F(NecTree, OneGigPagesReservedAtRunTime) {
  write("sys/devices/system/node/node0/hugepages/hugepages-1048576kB/nr_hugepages", "2\n");
  auto f = with_id(audit(), "hugepages.1g-runtime");
  ASSERT_EQ(f.size(), 1u);
  // Kernel 3.10 takes no per-node list: the total.
  EXPECT_THAT(f[0].remedy.kernel_args, ::testing::ElementsAre("hugepagesz=1G", "hugepages=2"));
  write("proc/cmdline", "ro hugepagesz=1G hugepages=2 quiet\n");
  EXPECT_TRUE(with_id(audit(), "hugepages.1g-runtime").empty());
}

TEST_F(NecTree, SwapFromMeminfoOnAHypervisor) {
  auto f = with_id(audit(HostRole::hypervisor), "memory.swap");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].observed, "8.0 GiB of swap active");
  write("proc/meminfo", "MemTotal:       97445600 kB\nSwapTotal:             0 kB\n");
  EXPECT_TRUE(with_id(audit(HostRole::hypervisor), "memory.swap").empty());
}

}  // namespace
}  // namespace polyaccel
