#include "discover/accel/health.h"

#include <gtest/gtest.h>

#include <fstream>

#include "support/test_support.h"

namespace polyaccel {
namespace {

using namespace std::chrono_literals;
const auto t0 = std::chrono::system_clock::time_point{} + 1000h;
const std::string kBus = "0000:cb:00.0";

AcceleratorEvent xid(std::uint64_t code, std::chrono::system_clock::time_point t) {
  AcceleratorEvent e;
  e.pci_bus_id = kBus;
  e.kind = AcceleratorEventKind::xid;
  e.code = code;
  e.time = t;
  return e;
}

AcceleratorSample sample(bool reachable) {
  AcceleratorSample s;
  s.pci_bus_id = kBus;
  s.reachable = reachable;
  return s;
}

TEST(Health, FatalXidMakesUnhealthyThenRecovers) {
  HealthTracker h{HealthPolicy{}};
  EXPECT_TRUE(h.health(kBus, t0).healthy);
  h.observe(xid(79, t0));
  auto d = h.health(kBus, t0 + 1s);
  EXPECT_FALSE(d.healthy);
  EXPECT_EQ(d.reason, "XID 79");
  EXPECT_FALSE(h.health(kBus, t0 + 59s).healthy);
  EXPECT_TRUE(h.health(kBus, t0 + 60s).healthy);  // no new event for the recovery window
}

TEST(Health, ApplicationXidsAreIgnored) {
  HealthTracker h{HealthPolicy{}};
  for (std::uint64_t code : {13, 31, 43, 45, 68, 109})
    h.observe(xid(code, t0));
  EXPECT_TRUE(h.health(kBus, t0 + 1s).healthy);
}

TEST(Health, UnreachableDeviceIsUnhealthyUntilSeenAgain) {
  HealthTracker h{HealthPolicy{}};
  h.observe(sample(false));
  EXPECT_FALSE(h.health(kBus, t0).healthy);
  h.observe(sample(true));
  EXPECT_TRUE(h.health(kBus, t0).healthy);
}

TEST(Health, UncorrectableEccAndCriticalEventsFollowThePolicy) {
  AcceleratorEvent ecc;
  ecc.pci_bus_id = kBus;
  ecc.kind = AcceleratorEventKind::ecc_uncorrectable;
  ecc.time = t0;
  HealthTracker strict{HealthPolicy{}};
  strict.observe(ecc);
  EXPECT_FALSE(strict.health(kBus, t0).healthy);
  HealthPolicy lenient;
  lenient.uncorrectable_ecc = false;
  HealthTracker h{lenient};
  h.observe(ecc);
  EXPECT_TRUE(h.health(kBus, t0).healthy);
}

TEST(Health, PolicyFromYaml) {
  auto p = HealthPolicy::from_yaml_text(
      "health:\n  fatal_xids: [79, 48]\n  recovery_seconds: 5\n  critical_events: false\n",
      "cfg.yaml");
  ASSERT_TRUE(p) << p.error().message();
  EXPECT_EQ(p->fatal_xids, (std::set<std::uint64_t>{48, 79}));
  EXPECT_EQ(p->recovery, 5s);
  EXPECT_FALSE(p->critical_events);
  EXPECT_TRUE(p->uncorrectable_ecc);
  HealthTracker h{*p};
  h.observe(xid(94, t0));  // no longer fatal under this policy
  EXPECT_TRUE(h.health(kBus, t0).healthy);
}

TEST(Health, BadPolicyNamesFileAndKey) {
  auto p = HealthPolicy::from_yaml_text("health:\n  fatal_xid: [79]\n", "cfg.yaml");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message().find("cfg.yaml: unknown key health.fatal_xid"), std::string::npos);
  p = HealthPolicy::from_yaml_text("health:\n  recovery_seconds: soon\n", "cfg.yaml");
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().input, "cfg.yaml");
  polyaccel::testing::TempDir dir;
  std::ofstream(dir.path() / "bad.yaml") << "health: [unclosed\n";
  p = HealthPolicy::from_yaml_file((dir.path() / "bad.yaml").string());
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message().find("not valid YAML"), std::string::npos);
  EXPECT_FALSE(HealthPolicy::from_yaml_file((dir.path() / "absent.yaml").string()));
}

}  // namespace
}  // namespace polyaccel
