// read_tuning_facts: the kernel command line, CPU governors and isolation, modules, IOMMU groups,
// drivers, PCIe ACS (config space), THP, limits..., from a sysfs/procfs tree built from the input
// (fuzz_support.h's FuzzTree format).
#include "discover/tuning.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  polyaccel::fuzz::FuzzTree tree(polyaccel::fuzz::as_string(data, size));
  polyaccel::TuningFacts facts = polyaccel::read_tuning_facts(tree.root().string());
  for (const auto& p : facts.problems)
    POLYACCEL_FUZZ_CHECK(!p.path.empty());
  return 0;
}
