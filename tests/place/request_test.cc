// Extra-spec parsing and validation with Nova's meaning and messages that name the key.
#include <gtest/gtest.h>

#include "place/flavor_file.h"
#include "place/request.h"

namespace polyaccel::place {
namespace {

constexpr std::uint64_t GiB = std::uint64_t{1} << 30;

Result<Request> parse(unsigned vcpus, std::vector<std::pair<std::string, std::string>> specs,
                      std::vector<PciAlias> aliases = {}) {
  return parse_request({vcpus, 16 * GiB, std::move(specs)}, aliases);
}

std::string error_of(unsigned vcpus, std::vector<std::pair<std::string, std::string>> specs) {
  auto r = parse(vcpus, std::move(specs));
  EXPECT_FALSE(r.ok());
  return r ? std::string() : r.error().message();
}

TEST(Request, NoSpecsMeansSharedWithoutNumaTopology) {
  auto r = parse(4, {});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->cpu_policy, CpuPolicy::shared);
  EXPECT_FALSE(r->numa_topology);
  EXPECT_TRUE(r->cells.empty());
}

TEST(Request, NumaTopologyOnlyForTheSpecsNovaNames) {
  EXPECT_TRUE(parse(4, {{"hw:numa_nodes", "1"}})->numa_topology);
  EXPECT_TRUE(parse(4, {{"hw:mem_page_size", "large"}})->numa_topology);
  EXPECT_TRUE(parse(4, {{"hw:cpu_policy", "dedicated"}})->numa_topology);
  EXPECT_TRUE(parse(4, {{"resources:PCPU", "4"}})->numa_topology);
  EXPECT_FALSE(parse(4, {{"hw:mem_page_size", "0"}})->numa_topology);  // 0 counts as not set
  EXPECT_FALSE(parse(4, {{"hw:pci_numa_affinity_policy", "required"}})->numa_topology);
}

TEST(Request, EvenSplitAcrossCells) {
  auto r = parse(8, {{"hw:numa_nodes", "2"}, {"hw:cpu_policy", "dedicated"}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->cells.size(), 2u);
  EXPECT_EQ(r->cells[0].vcpus, (std::vector<unsigned>{0, 1, 2, 3}));
  EXPECT_EQ(r->cells[1].vcpus, (std::vector<unsigned>{4, 5, 6, 7}));
  EXPECT_EQ(r->cells[1].memory_bytes, 8 * GiB);
}

TEST(Request, AsymmetricSplitIsRefusedAsNovaDoes) {
  EXPECT_NE(error_of(7, {{"hw:numa_nodes", "2"}}).find("ImageNUMATopologyAsymmetric"),
            std::string::npos);
}

TEST(Request, ExplicitCellsInMiB) {
  auto r = parse(6, {{"hw:numa_nodes", "2"},
                     {"hw:numa_cpus.0", "0-1"},
                     {"hw:numa_cpus.1", "2-5"},
                     {"hw:numa_mem.0", "4096"},
                     {"hw:numa_mem.1", "12288"}});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->cells[0].vcpus.size(), 2u);
  EXPECT_EQ(r->cells[1].memory_bytes, 12 * GiB);
}

TEST(Request, ExplicitCellsMustCoverEveryVcpuAndTheMemory) {
  auto missing = error_of(6, {{"hw:numa_nodes", "2"},
                              {"hw:numa_cpus.0", "0-1"},
                              {"hw:numa_cpus.1", "2-4"},
                              {"hw:numa_mem.0", "4096"},
                              {"hw:numa_mem.1", "12288"}});
  EXPECT_NE(missing.find("hw:numa_cpus"), std::string::npos);
  EXPECT_NE(missing.find("5"), std::string::npos);
  EXPECT_NE(missing.find("ImageNUMATopologyCPUsUnassigned"), std::string::npos);
  EXPECT_NE(error_of(6, {{"hw:numa_nodes", "2"},
                         {"hw:numa_cpus.0", "0-2"},
                         {"hw:numa_cpus.1", "2-5"},
                         {"hw:numa_mem.0", "4096"},
                         {"hw:numa_mem.1", "12288"}})
                .find("ImageNUMATopologyCPUDuplicates"),
            std::string::npos);
  EXPECT_NE(error_of(6, {{"hw:numa_nodes", "2"},
                         {"hw:numa_cpus.0", "0-1"},
                         {"hw:numa_cpus.1", "2-5"},
                         {"hw:numa_mem.0", "4"},
                         {"hw:numa_mem.1", "12"}})
                .find("MiB"),
            std::string::npos);
  EXPECT_NE(
      error_of(6, {{"hw:numa_nodes", "2"}, {"hw:numa_cpus.0", "0-5"}, {"hw:numa_mem.0", "16384"}})
          .find("ImageNUMATopologyIncomplete"),
      std::string::npos);
}

TEST(Request, UnknownAndBadKeysNameTheKey) {
  auto unknown = error_of(4, {{"hw:cpu_polcy", "dedicated"}});
  EXPECT_NE(unknown.find("hw:cpu_polcy"), std::string::npos);
  EXPECT_NE(unknown.find("does not appear to be a valid extra spec"), std::string::npos);
  auto bad = error_of(4, {{"hw:cpu_policy", "pinned"}});
  EXPECT_NE(bad.find("hw:cpu_policy"), std::string::npos);
  EXPECT_NE(bad.find("shared, dedicated, mixed"), std::string::npos);
  EXPECT_NE(error_of(4, {{"hw:numa_nodes", "0"}}).find("min value"), std::string::npos);
  EXPECT_NE(error_of(4, {{"polyaccel:nic_afinity", "pix"}}).find("polyaccel:nic_afinity"),
            std::string::npos);
  EXPECT_NE(error_of(4, {{"polyaccel:nic_affinity", "sys"}}).find("pix, pxb, phb, node"),
            std::string::npos);
  // Namespaces Nova does not validate are left alone.
  EXPECT_TRUE(
      parse(4, {{"aggregate_instance_extra_specs:gpu", "true"}, {"hw:watchdog_action", "reset"}}));
}

TEST(Request, ContradictionsAreRefusedWithNovasException) {
  EXPECT_NE(error_of(4, {{"hw:cpu_thread_policy", "isolate"}})
                .find("CPUThreadPolicyConfigurationInvalid"),
            std::string::npos);
  EXPECT_NE(error_of(4, {{"hw:cpu_policy", "shared"}, {"hw:cpu_thread_policy", "prefer"}})
                .find("hw:cpu_thread_policy"),
            std::string::npos);
  EXPECT_NE(error_of(4, {{"hw:emulator_threads_policy", "isolate"}})
                .find("BadRequirementEmulatorThreadsPolicy"),
            std::string::npos);
  EXPECT_NE(error_of(4, {{"hw:cpu_dedicated_mask", "0-1"}}).find("RequiredMixedInstancePolicy"),
            std::string::npos);
  EXPECT_NE(error_of(4, {{"hw:cpu_policy", "mixed"}}).find("RequiredMixedOrRealtimeCPUMask"),
            std::string::npos);
  EXPECT_NE(error_of(4, {{"hw:cpu_policy", "mixed"}, {"hw:cpu_dedicated_mask", "0-3"}})
                .find("InvalidMixedInstanceDedicatedMask"),
            std::string::npos);
  EXPECT_NE(
      error_of(4, {{"resources:PCPU", "4"}, {"hw:cpu_policy", "dedicated"}}).find("resources:PCPU"),
      std::string::npos);
  EXPECT_NE(error_of(4, {{"resources:PCPU", "3"}}).find("PCPU"), std::string::npos);
  EXPECT_NE(error_of(4, {{"hw:cpu_policy", "dedicated"},
                         {"hw:cpu_thread_policy", "isolate"},
                         {"trait:HW_CPU_HYPERTHREADING", "forbidden"}})
                .find("trait:HW_CPU_HYPERTHREADING"),
            std::string::npos);
}

TEST(Request, MixedMaskExplicitOrExcluding) {
  auto r = parse(8, {{"hw:cpu_policy", "mixed"}, {"hw:cpu_dedicated_mask", "^0-1"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->pinned_vcpus.to_list(), "2-7");
  auto rt = parse(
      8, {{"hw:cpu_policy", "mixed"}, {"hw:cpu_realtime", "yes"}, {"hw:cpu_realtime_mask", "4-7"}});
  ASSERT_TRUE(rt);
  EXPECT_EQ(rt->pinned_vcpus.to_list(), "4-7");
}

TEST(Request, TraitsMeanThreadPolicies) {
  EXPECT_EQ(parse(4, {{"resources:PCPU", "4"}, {"trait:HW_CPU_HYPERTHREADING", "forbidden"}})
                ->thread_policy,
            ThreadPolicy::isolate);
  EXPECT_EQ(parse(4, {{"hw:cpu_policy", "dedicated"}, {"trait:HW_CPU_HYPERTHREADING", "required"}})
                ->thread_policy,
            ThreadPolicy::require);
  auto emulator = parse(4, {{"resources:PCPU", "5"}, {"hw:emulator_threads_policy", "isolate"}});
  ASSERT_TRUE(emulator);
  EXPECT_EQ(emulator->cpu_policy, CpuPolicy::dedicated);
}

TEST(Request, PageSizesAsNovaSpellsThem) {
  auto size = [](const std::string& v) {
    auto p = parse_page_size("hw:mem_page_size", v);
    return p ? p->second : std::uint64_t{0};
  };
  EXPECT_EQ(size("2048"), 2u << 20);
  EXPECT_EQ(size("1048576"), GiB);
  EXPECT_EQ(size("2MB"), 2u << 20);
  EXPECT_EQ(size("2MiB"), 2u << 20);
  EXPECT_EQ(size("2048KB"), 2u << 20);
  EXPECT_EQ(size("1GB"), GiB);
  EXPECT_EQ(size("1GiB"), GiB);
  EXPECT_EQ(size("1Gb"), 128u << 20);  // bits
  EXPECT_EQ(parse_page_size("k", "large")->first, PageSizeRequest::large);
  EXPECT_EQ(parse_page_size("k", "0")->first, PageSizeRequest::none);
  // Valid to Nova's API validator, refused at boot (MemoryPageSizeInvalid).
  for (const char* boot_fails : {"1G", "2M", "2Mi", "2048K"}) {
    auto p = parse_page_size("hw:mem_page_size", boot_fails);
    ASSERT_FALSE(p) << boot_fails;
    EXPECT_NE(p.error().message().find("MemoryPageSizeInvalid"), std::string::npos);
  }
  auto bad = parse_page_size("hw:mem_page_size", "huge");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("hw:mem_page_size"), std::string::npos);
}

TEST(Request, PciAliasesAndNicAffinity) {
  std::vector<PciAlias> aliases = {*parse_pci_alias_option("h100=10de:2330")};
  auto r =
      parse(8, {{"pci_passthrough:alias", "h100:2"}, {"polyaccel:nic_affinity", "pix"}}, aliases);
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_EQ(r->devices.size(), 1u);
  EXPECT_EQ(r->devices[0].count, 2u);
  EXPECT_EQ(r->rdma_nics, 2u);  // one per device by default
  EXPECT_EQ(r->nic_affinity, NicAffinity::pix);
  auto undefined = parse(8, {{"pci_passthrough:alias", "a100:1"}}, aliases);
  ASSERT_FALSE(undefined);
  EXPECT_NE(undefined.error().message().find("PciRequestAliasNotDefined"), std::string::npos);
  EXPECT_FALSE(parse(8, {{"polyaccel:nic_affinity", "pix"}}));
  EXPECT_FALSE(parse(8, {{"pci_passthrough:alias", "h100"}}, aliases));
}

TEST(PciAlias, OptionAndNovaFileForms) {
  auto a = parse_pci_alias_option("mlx=15b3");
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->device_id);
  EXPECT_FALSE(parse_pci_alias_option("x=zz:1"));
  EXPECT_FALSE(parse_pci_alias_option("noequals"));
  auto file = parse_pci_alias_file(
      "nova.conf",
      "[pci]\n# GPUs\nalias = {\"name\": \"a100\", \"vendor_id\": \"10de\", "
      "\"product_id\": \"20b0\", \"numa_policy\": \"required\"}\n"
      "alias = {\"name\": \"cx6\", \"vendor_id\": \"15b3\", \"product_id\": \"101b\"}\n");
  ASSERT_TRUE(file) << file.error().message();
  ASSERT_EQ(file->size(), 2u);
  EXPECT_EQ((*file)[0].numa_policy, PciNumaPolicy::required);
  auto array = parse_pci_alias_file(
      "a.json", R"([{"name": "t4", "vendor_id": "10de", "product_id": "1eb8"}])");
  ASSERT_TRUE(array);
  EXPECT_EQ((*array)[0].device_id, 0x1eb8);
  auto bad = parse_pci_alias_file("b.json", R"([{"name": "t4", "vendor_id": "xyz"}])");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("vendor_id"), std::string::npos);
}

TEST(FlavorFile, OpenstackJsonWithPropertiesAsStringOrDict) {
  auto s = parse_flavor_file("f.json", R"({"name": "g1", "vcpus": 8, "ram": 16384, "disk": 0,
      "properties": "hw:cpu_policy='dedicated', hw:numa_nodes='2', pci_passthrough:alias='a100:1'"})");
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(s->request.memory_bytes, 16 * GiB);
  ASSERT_EQ(s->request.extra_specs.size(), 3u);
  EXPECT_EQ(s->request.extra_specs[2].second, "a100:1");
  auto d = parse_flavor_file("f.json", R"({"name": "g1", "vcpus": 8, "ram": 16384,
      "properties": {"hw:cpu_policy": "dedicated"}})");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->request.extra_specs[0].first, "hw:cpu_policy");
  EXPECT_FALSE(parse_flavor_file("f.json", R"({"vcpus": 8})"));
  EXPECT_FALSE(parse_flavor_file("f.json", R"({"vcpus": 8, "ram": 1, "properties": "hw:x"})"));
}

TEST(FlavorFile, OurYaml) {
  auto y = parse_flavor_file("f.yaml",
                             "name: g1\nvcpus: 16\nmemory: 64GiB\n"
                             "extra_specs:\n  hw:cpu_policy: dedicated\n"
                             "  pci_passthrough:alias: \"h100:1\"\n"
                             "pci_aliases:\n  h100: \"10de:2330\"\n");
  ASSERT_TRUE(y) << y.error().message();
  EXPECT_EQ(y->request.memory_bytes, 64 * GiB);
  ASSERT_EQ(y->aliases.size(), 1u);
  EXPECT_TRUE(parse_request(y->request, y->aliases));
  EXPECT_FALSE(parse_flavor_file("f.yaml", "name: g1\nvcpus: many\nmemory: 1GiB\n"));
  EXPECT_FALSE(parse_flavor_file("f.yaml", "name: g1\nvcpus: 2\nmemory: lots\n"));
}

}  // namespace
}  // namespace polyaccel::place
