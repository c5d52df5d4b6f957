// mig-parted's own config files parse as they are, and what they ask for fits our tables.
#include "share/mig_parted_config.h"

#include <gtest/gtest.h>

#include "share/mig_profiles.h"
#include "support/test_support.h"

namespace polyaccel {
namespace {

std::filesystem::path config_file(const std::string& name) {
  return polyaccel::testing::shared_dir() / "fixtures/configs" / name;
}

TEST(MigPartedConfig, ShippedFilesParse) {
  for (const char* name : {"mig-parted_config-default.yaml", "mig-parted_config.yaml",
                           "mig-parted_dgx-station-80gb-config.yaml"}) {
    auto c = read_mig_parted_config(config_file(name));
    ASSERT_TRUE(c) << c.error().message();
    EXPECT_GT(c->configs.size(), 5u) << name;
  }
}

TEST(MigPartedConfig, ExampleConfigSelectsPerDevice) {
  auto c = read_mig_parted_config(config_file("mig-parted_config.yaml"));
  ASSERT_TRUE(c);
  std::vector<MigPartedGpu> gpus;
  for (unsigned i = 0; i < 8; ++i)
    gpus.push_back({i, 0x20B010DE});
  auto t = select_mig_parted_config(*c, "custom-config", gpus);
  ASSERT_TRUE(t);
  ASSERT_EQ(t->size(), 8u);
  EXPECT_FALSE((*t)[0]->mig_enabled);
  EXPECT_TRUE((*t)[4]->mig_enabled);
  EXPECT_EQ((*t)[4]->devices, (MigRequest{{"1g.5gb", 7}}));
  EXPECT_EQ((*t)[7]->devices, (MigRequest{{"1g.5gb", 2}, {"2g.10gb", 1}, {"3g.20gb", 1}}));
  auto missing = select_mig_parted_config(*c, "no-such", gpus);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().remedy.find("all-balanced"), std::string::npos);
}

TEST(MigPartedConfig, DeviceFilterPicksTheEntryOfEachModel) {
  auto c = read_mig_parted_config(config_file("mig-parted_config-default.yaml"));
  ASSERT_TRUE(c);
  auto t = select_mig_parted_config(*c, "all-balanced", {{0, 0x233510DE}, {1, 0x290110DE}});
  ASSERT_TRUE(t);
  ASSERT_TRUE((*t)[0] && (*t)[1]);
  EXPECT_EQ((*t)[0]->devices, (MigRequest{{"1g.18gb", 2}, {"2g.35gb", 1}, {"3g.71gb", 1}}));
  EXPECT_EQ((*t)[1]->devices, (MigRequest{{"1g.23gb", 2}, {"2g.45gb", 1}, {"3g.90gb", 1}}));
  auto station = read_mig_parted_config(config_file("mig-parted_dgx-station-80gb-config.yaml"));
  ASSERT_TRUE(station);
  // The DGX Station's display GPU (0x1FB010DE) matches the second entry: MIG stays off.
  auto s = select_mig_parted_config(*station, "all-1g.10gb-dgx-station-80",
                                    {{0, 0x20B210DE}, {1, 0x1FB010DE}, {2, 0x12345678}});
  ASSERT_TRUE(s);
  EXPECT_TRUE((*s)[0]->mig_enabled);
  EXPECT_FALSE((*s)[1]->mig_enabled);
  EXPECT_FALSE((*s)[2].has_value()) << "no entry applies to an unlisted model";
}

// Every entry of mig-parted's default catalogue that names one of our models asks for profiles
// our table has, in counts that fit one GPU: the tables and NVIDIA's configs agree.
TEST(MigPartedConfig, DefaultCatalogueFitsOurTables) {
  auto c = read_mig_parted_config(config_file("mig-parted_config-default.yaml"));
  ASSERT_TRUE(c);
  unsigned checked = 0;
  for (const auto& [name, entries] : c->configs) {
    for (const auto& e : entries) {
      for (std::uint32_t id : e.device_filter) {
        const MigGeometry* g = find_mig_geometry(id);
        if (!g || !e.mig_enabled || e.mig_devices.empty()) continue;
        auto plan = plan_mig_per_gpu({{0, g, true, id, {}}}, {{true, e.mig_devices}}, false);
        ASSERT_TRUE(plan) << name << " on " << g->model << ": " << plan.error().message();
        EXPECT_TRUE(plan->fit) << name << " on " << g->model << ": " << plan->reason;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 25u);
}

TEST(MigPartedConfig, MalformedAndForeignFilesAreRefusedWithTheLine) {
  struct Case {
    std::string text, where, problem;
  } cases[] = {
      {"version: v2\nmig-configs: {}\n", "t.yaml",
       "version must be v1 (mig-parted's config format)"},
      {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: true\n"
       "      mig-device: {}\n",
       "t.yaml:6", "unknown key 'mig-device'"},
      {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: false\n"
       "      mig-devices: {\"1g.5gb\": 1}\n",
       "t.yaml:4", "mig-devices must be empty when mig-enabled is false"},
      {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: true\n", "t.yaml:4",
       "mig-devices is required when mig-enabled is true"},
      {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: true\n"
       "      device-filter: 0x20B0\n      mig-devices: {}\n",
       "t.yaml:6", "device-filter 0x20B0 is not a PCI id 0x<device><vendor>"},
      {"version: v1\nmig-configs:\n  a: [\n", "t.yaml:4", ""},
      {"flags:\n  migStrategy: single\n", "t.yaml:1", "unknown key 'flags'"},
      {"version: v1\nmig-configs:\n  a:\n    - devices: [0, x]\n      mig-enabled: true\n"
       "      mig-devices: {}\n",
       "t.yaml:4", ""},
  };
  for (const auto& c : cases) {
    auto r = parse_mig_parted_config(c.text, "t.yaml");
    ASSERT_FALSE(r) << c.text;
    EXPECT_EQ(r.error().code, ErrorCode::bad_input);
    EXPECT_EQ(r.error().input, c.where) << c.text;
    if (!c.problem.empty()) {
      EXPECT_EQ(r.error().problem, c.problem) << c.text;
    }
  }
}

// Issue 29: a value of the wrong kind names its key, file and line (yaml-cpp said only "bad
// conversion"); a GPU in two entries of a config is refused (the second was dropped without a
// word and apply reported "0 changes").
TEST(MigPartedConfig, WrongValuesNameTheirKeyAndAGpuIsInOneEntry) {
  struct Case {
    std::string text, where, problem;
  } cases[] = {
      {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: \"yes please\"\n",
       "t.yaml:5", "mig-enabled: 'yes please' is not true or false"},
      {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: [true]\n",
       "t.yaml:5", "mig-enabled must be a single value, not a list or mapping"},
      {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: true\n"
       "      device-filter: [{a: 1}]\n      mig-devices: {}\n",
       "t.yaml:6", "device-filter must be a single value, not a list or mapping"},
      {"version: v1\nmig-configs:\n  [a]: []\n", "t.yaml:3",
       "a mig-configs name must be a single value, not a list or mapping"},
      {"version: v1\nmig-configs:\n  a:\n    - devices: [0, 1]\n      mig-enabled: false\n"
       "    - devices: [1]\n      mig-enabled: true\n      mig-devices: {\"1g.5gb\": 7}\n",
       "t.yaml:6", "config a: GPU 1 is also in the entry at t.yaml:4"},
      {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: false\n"
       "    - devices: [3]\n      mig-enabled: false\n",
       "t.yaml:6", "config a: GPU 3 is also in the entry at t.yaml:4"},
      {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      device-filter: 0x20B010DE\n"
       "      mig-enabled: false\n    - devices: all\n      mig-enabled: false\n",
       "t.yaml:7", "config a: every GPU is also in the entry at t.yaml:4"},
  };
  for (const auto& c : cases) {
    auto r = parse_mig_parted_config(c.text, "t.yaml");
    ASSERT_FALSE(r) << c.text;
    EXPECT_EQ(r.error().code, ErrorCode::bad_input);
    EXPECT_EQ(r.error().input, c.where) << c.text << r.error().message();
    EXPECT_EQ(r.error().problem, c.problem) << c.text;
  }
  // The same GPU index for two models (device-filter) is two GPUs, and yes/no are YAML booleans.
  auto ok = parse_mig_parted_config(
      "version: v1\nmig-configs:\n  a:\n    - devices: all\n      device-filter: 0x20B010DE\n"
      "      mig-enabled: no\n    - devices: all\n      device-filter: 0x233110DE\n"
      "      mig-enabled: yes\n      mig-devices: {\"1g.10gb\": 7}\n",
      "t.yaml");
  ASSERT_TRUE(ok) << ok.error().message();
  EXPECT_FALSE(ok->configs.at("a")[0].mig_enabled);
  EXPECT_TRUE(ok->configs.at("a")[1].mig_enabled);
}

}  // namespace
}  // namespace polyaccel
