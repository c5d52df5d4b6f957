// complete_from_sysfs for NVIDIA GPUs: /proc/driver/nvidia/gpus/<bdf>/numa_status (the NUMA node
// of a coherent GPU's memory), with the hugepage, PCIe link and SR-IOV reads beside it, from a
// tree built from the input (fuzz_support.h's FuzzTree format).
#include "discover/hwloc_source.h"
#include "fuzz_support.h"
#include "tree_model.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  polyaccel::fuzz::FuzzTree tree(polyaccel::fuzz::as_string(data, size));
  polyaccel::HostModel model = polyaccel::fuzz::tree_model(tree.root());
  polyaccel::detail::complete_from_sysfs(model, tree.root().string());
  return 0;
}
