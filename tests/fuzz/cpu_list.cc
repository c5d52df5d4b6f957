// CpuSet::parse_list (the kernel's "0-3,8" lists: sysfs cpulists, --cpus, state files) and Nova's
// CPU spec with exclusions (hw:cpu_dedicated_mask, hw:numa_cpus.N).
#include "core/cpuset.h"
#include "fuzz_support.h"
#include "place/request.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text = polyaccel::fuzz::as_string(data, size);
  if (auto set = polyaccel::CpuSet::parse_list(text)) {
    // What we print reads back to the same set.
    std::string list = set->to_list();
    auto again = polyaccel::CpuSet::parse_list(list);
    POLYACCEL_FUZZ_CHECK(again && *again == *set);
    POLYACCEL_FUZZ_CHECK(again->count() == set->count());
  }
  if (auto spec = polyaccel::place::parse_cpu_spec(text, 64)) {
    auto again = polyaccel::CpuSet::parse_list(spec->to_list());
    POLYACCEL_FUZZ_CHECK(again && *again == *spec);
  }
  return 0;
}
