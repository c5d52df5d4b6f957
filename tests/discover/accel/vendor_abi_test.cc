// Our own declarations of the NVML, ROCm SMI, AMD SMI and HLML C ABIs, compiled, against the
// facts recorded from the vendors' headers in ../shared/reference/vendor-abi/, for every header
// version there: constants, struct sizes and alignments, field offsets, sizes and kinds, typedef
// sizes, function signatures and function-like macros. A difference fails the test unless the
// API's table (vendor_abi_<api>.cc) lists it as handled, with the reason; a handled entry that no
// longer matches anything fails it too, and so does a name the data lists that we do not
// declare, or one we declare that the data lacks without a reason. The comparator itself is
// tested on mutated copies of the data, so that the test is known to fail when it should.
#include "vendor_abi.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace polyaccel::vendor_abi {
namespace {

using nlohmann::json;
using ::testing::IsEmpty;

std::string keys(const std::vector<Difference>& diffs) {
  std::string out;
  for (const auto& d : diffs)
    out += "\n  " + d.key + ": " + d.text;
  return out;
}

void expect_matches(const ApiTables& tables) {
  const json facts = load_facts(tables.declared.api);
  const auto differences = compare(tables.declared, facts);
  const Verdict verdict = judge(differences, tables.handled);
  EXPECT_TRUE(verdict.unhandled.empty())
      << "differences our code does not handle:" << keys(verdict.unhandled);
  for (const auto& h : verdict.stale) {
    ADD_FAILURE() << "handled entry that matches no difference (remove it): " << h.key;
  }
  EXPECT_THAT(coverage_gaps(tables.declared, facts, tables.undocumented, tables.not_declared),
              IsEmpty());
  // The handled differences, for the log.
  for (const auto& h : tables.handled)
    std::printf("handled %s: %s\n", h.key.c_str(), h.reason.c_str());
}

TEST(VendorAbi, NvmlMatchesTheHeaders) {
  expect_matches(nvml_tables());
}

TEST(VendorAbi, RocmSmiMatchesTheHeaders) {
  expect_matches(rocm_smi_tables());
}

TEST(VendorAbi, AmdSmiMatchesTheHeaders) {
  expect_matches(amd_smi_tables());
}

TEST(VendorAbi, HlmlMatchesTheHeaders) {
  expect_matches(hlml_tables());
}

// Every version of every file was compared: a file whose versions the comparison skipped would
// pass without checking anything.
TEST(VendorAbi, EveryVersionIsCompared) {
  for (const ApiTables& t : {nvml_tables(), rocm_smi_tables(), amd_smi_tables(), hlml_tables()}) {
    const json facts = load_facts(t.declared.api);
    ASSERT_GE(facts.at("versions").size(), 2u) << t.declared.api;
    json mutated = facts;
    for (auto& [name, version] : mutated.at("versions").items()) {
      // Take one struct we declare away from this version only: exactly its entries differ.
      const std::string victim = t.declared.structs.front().name;
      ASSERT_TRUE(version.at("structs").contains(victim)) << name << " " << victim;
      version.at("structs").erase(victim);
      const auto differences = compare(t.declared, mutated);
      bool seen = false;
      for (const auto& d : differences)
        seen = seen || d.key == t.declared.api + "/" + name + "/struct/" + victim;
      EXPECT_TRUE(seen) << t.declared.api << " " << name << ":" << keys(differences);
      version.at("structs")[victim] = facts.at("versions").at(name).at("structs").at(victim);
    }
  }
}

// ---- the comparator, on known inputs --------------------------------------------------------

const json kVersion = json::parse(R"({
  "structs": {"s16": {"sizeof": 16}, "big": {"sizeof": 84}},
  "incomplete_types": ["struct handle_st"]})");

TEST(VendorAbiComparator, ParsesTheNormalizedTypes) {
  EXPECT_EQ(parse_type("enum32", kVersion).str(), "i4");
  EXPECT_EQ(parse_type("uint64_t*", kVersion).str(), "ptr(i8)");
  EXPECT_EQ(parse_type("const char**", kVersion).str(), "ptr(ptr(i1))");
  EXPECT_EQ(parse_type("void**", kVersion).str(), "ptr(ptr(void))");
  EXPECT_EQ(parse_type("char[19]", kVersion).str(), "i1[19]");
  EXPECT_EQ(parse_type("uint8_t[8][8]", kVersion).str(), "i1[8][8]");
  EXPECT_EQ(parse_type("const struct s16*", kVersion).str(), "ptr(agg s16:16)");
  EXPECT_EQ(parse_type("struct handle_st*", kVersion).str(), "ptr(opaque handle_st)");
  EXPECT_EQ(parse_type("float*", kVersion).str(), "ptr(f4)");
  EXPECT_THROW(parse_type("long double", kVersion), std::runtime_error);
}

TEST(VendorAbiComparator, KindsOfOurTypes) {
  struct Opaque;
  struct Twelve {
    int a, b, c;
  };
  EXPECT_EQ(kind_of<unsigned long long>().str(), "i8");
  EXPECT_EQ(kind_of<const char*>().str(), "ptr(i1)");
  EXPECT_EQ(kind_of<Opaque**>().str(), "ptr(ptr(opaque))");
  EXPECT_EQ(kind_of<std::uint64_t[8][8]>().str(), "i8[8][8]");
  EXPECT_EQ(kind_of<Twelve*>().str(), "ptr(agg:12)");
  EXPECT_EQ(kind_of<double>().str(), "f8");
  const Signature s = signature_of<int(void*, unsigned, float*)>();
  EXPECT_EQ(s.ret.str(), "i4");
  ASSERT_EQ(s.params.size(), 3u);
  EXPECT_EQ(s.params[2].str(), "ptr(f4)");
}

TEST(VendorAbiComparator, PointerRules) {
  auto same = [](const Kind& ours, const std::string& vendor) {
    return !compare_kinds(ours, parse_type(vendor, kVersion), false).has_value();
  };
  struct Big {
    char bytes[84];
  };
  struct Small {
    char bytes[52];
  };
  EXPECT_TRUE(same(kind_of<void*>(), "struct big*"));  // void on our side: nothing to check
  EXPECT_TRUE(same(kind_of<Big*>(), "void*"));
  EXPECT_TRUE(same(kind_of<Big*>(), "struct big*"));
  EXPECT_FALSE(same(kind_of<Small*>(), "struct big*"));          // the library would write past it
  EXPECT_TRUE(same(kind_of<Big*>(), "struct s16*"));             // a larger buffer is fine
  EXPECT_FALSE(same(kind_of<std::uint64_t*>(), "struct s16*"));  // 8 bytes for 16
  EXPECT_FALSE(same(kind_of<std::uint32_t*>(), "uint64_t*"));
  EXPECT_FALSE(same(kind_of<std::uint64_t*>(), "uint32_t*"));  // we would read 4 bytes too many
  EXPECT_TRUE(same(kind_of<int*>(), "enum32*"));               // signedness does not matter
  EXPECT_TRUE(same(kind_of<void**>(), "struct handle_st**"));
  EXPECT_FALSE(same(kind_of<std::uint32_t>(), "uint64_t"));
  EXPECT_FALSE(same(kind_of<float*>(), "uint32_t*"));
  EXPECT_FALSE(same(kind_of<char[15]>(), "char[19]"));
}

// A deliberately wrong entry in the data (the same as a wrong declaration on our side) is caught.
TEST(VendorAbiComparator, MutatedFactsAreCaught) {
  const ApiTables hlml = hlml_tables();
  const ApiTables nvml = nvml_tables();
  const ApiTables amd_smi = amd_smi_tables();
  struct Mutation {
    const ApiTables* tables;
    std::string what;
    std::function<void(json&)> apply;
    std::string expected_key;
  };
  const std::vector<Mutation> mutations = {
      {&hlml, "a larger pci_info in current Gaudi software",
       [](json& f) {
         f["versions"]["pyhlml-types-generated"]["structs"]["hlml_pci_info_t"]["sizeof"] = 88;
       },
       "hlml/pyhlml-types-generated/struct/hlml_pci_info_t/sizeof"},
      {&hlml, "a moved field",
       [](json& f) {
         for (auto& field :
              f["versions"]["gohlml-v1.16.0"]["structs"]["hlml_pci_info_t"]["fields"]) {
           if (field["name"] == "device") field["offset"] = 24;
         }
       },
       "hlml/gohlml-v1.16.0/struct/hlml_pci_info_t/device/offset"},
      {&hlml, "a field the vendor renamed",
       [](json& f) {
         for (auto& field : f["versions"]["gohlml-v1.16.0"]["structs"]["hlml_memory_t"]["fields"]) {
           if (field["name"] == "used") field["name"] = "in_use";
         }
       },
       "hlml/gohlml-v1.16.0/struct/hlml_memory_t/used"},
      {&hlml, "a changed constant",
       [](json& f) {
         f["versions"]["gohlml-v1.16.0"]["constants"]["HLML_ERROR_TIMEOUT"]["value"] = 11;
       },
       "hlml/gohlml-v1.16.0/constant/HLML_ERROR_TIMEOUT"},
      {&hlml, "an enum of another size",
       [](json& f) { f["versions"]["gohlml-v1.16.0"]["types"]["hlml_return_t"]["size"] = 8; },
       "hlml/gohlml-v1.16.0/type/hlml_return_t"},
      {&nvml, "a link count past ours",
       [](json& f) {
         f["versions"]["cuda-13.3"]["constants"]["NVML_NVLINK_MAX_LINKS"]["value"] = 48;
       },
       "nvml/cuda-13.3/constant/NVML_NVLINK_MAX_LINKS"},
      {&amd_smi, "an enumerator we compare although names.constants does not list it",
       [](json& f) {
         f["versions"]["amdsmi-26.1.0-therock"]["enums"]["amdsmi_memory_type_t"]["enumerators"]
          ["AMDSMI_MEM_TYPE_GTT"] = 3;
       },
       "amd_smi/amdsmi-26.1.0-therock/constant/AMDSMI_MEM_TYPE_GTT"},
      {&amd_smi, "a field of the metrics table past the prefix",
       [](json& f) {
         for (auto& field :
              f["versions"]["amdsmi-26.1.0-alumet"]["structs"]["amdsmi_gpu_metrics_t"]["fields"]) {
           if (field["name"] == "vram_max_bandwidth") field["offset"] = 4512;
         }
       },
       "amd_smi/amdsmi-26.1.0-alumet/struct/amdsmi_gpu_metrics_t/vram_max_bandwidth/offset"},
      {&nvml, "a wider out-parameter",
       [](json& f) {
         f["versions"]["cuda-13.3"]["functions"]["nvmlDeviceGetPowerUsage"]["signature"] =
             "enum32(struct nvmlDevice_st*, uint64_t*)";
       },
       "nvml/cuda-13.3/function/nvmlDeviceGetPowerUsage/param2"},
      {&nvml, "one more parameter",
       [](json& f) {
         f["versions"]["cuda-12.9"]["functions"]["nvmlDeviceGetUUID"]["signature"] =
             "enum32(struct nvmlDevice_st*, char*, uint32_t, uint32_t)";
       },
       "nvml/cuda-12.9/function/nvmlDeviceGetUUID/arity"},
      {&nvml, "a struct that grew behind a pointer we pass",
       [](json& f) { f["versions"]["cuda-13.3"]["structs"]["nvmlMemory_t"]["sizeof"] = 32; },
       "nvml/cuda-13.3/function/nvmlDeviceGetMemoryInfo/param2"},
      {&nvml, "a function a version lacks",
       [](json& f) { f["versions"]["cuda-12.9"]["functions"]["nvmlShutdown"]["present"] = false; },
       "nvml/cuda-12.9/function/nvmlShutdown"},
  };
  for (const Mutation& m : mutations) {
    SCOPED_TRACE(m.what);
    json facts = load_facts(m.tables->declared.api);
    const auto before = judge(compare(m.tables->declared, facts), m.tables->handled).unhandled;
    ASSERT_TRUE(before.empty()) << keys(before);
    m.apply(facts);
    const Verdict v = judge(compare(m.tables->declared, facts), m.tables->handled);
    bool caught = false;
    for (const auto& d : v.unhandled)
      caught = caught || d.key == m.expected_key;
    EXPECT_TRUE(caught) << "expected " << m.expected_key << ", got:" << keys(v.unhandled);
  }
}

TEST(VendorAbiComparator, HandledEntriesCoverByPrefixAndStaleOnesAreReported) {
  const std::vector<Difference> diffs = {
      {"a/v1/struct/s/sizeof", ""}, {"a/v1/struct/s/f/offset", ""}, {"a/v1/struct/st/sizeof", ""}};
  const Verdict v = judge(diffs, {{"a/v1/struct/s", "both layouts"}, {"a/v2/constant/X", "gone"}});
  ASSERT_EQ(v.unhandled.size(), 1u);  // "a/v1/struct/s" does not cover "a/v1/struct/st"
  EXPECT_EQ(v.unhandled[0].key, "a/v1/struct/st/sizeof");
  ASSERT_EQ(v.stale.size(), 1u);
  EXPECT_EQ(v.stale[0].key, "a/v2/constant/X");
}

TEST(VendorAbiComparator, CoverageGapsBothWays) {
  ApiTables t = hlml_tables();
  const json facts = load_facts("hlml");
  ASSERT_THAT(coverage_gaps(t.declared, facts, t.undocumented), IsEmpty());
  t.declared.functions.pop_back();  // a function the data has that we no longer declare
  t.declared.constants.push_back({"HLML_MADE_UP", value_of(1), {}});  // one it lacks, no reason
  const auto gaps = coverage_gaps(t.declared, facts, t.undocumented);
  EXPECT_EQ(gaps.size(), 2u) << ::testing::PrintToString(gaps);
  t.undocumented.push_back({"HLML_MADE_UP", "a test"});
  EXPECT_EQ(coverage_gaps(t.declared, facts, t.undocumented).size(), 1u);
}

}  // namespace
}  // namespace polyaccel::vendor_abi
