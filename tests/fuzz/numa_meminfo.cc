// read_host_sample: each NUMA node's meminfo and numastat (the exporter's host sampler), with
// the hugepage and PCIe link refresh, from a tree built from the input (FuzzTree format).
#include "exporter/host_sampler.h"
#include "fuzz_support.h"
#include "tree_model.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  polyaccel::fuzz::FuzzTree tree(polyaccel::fuzz::as_string(data, size));
  polyaccel::HostModel model = polyaccel::fuzz::tree_model(tree.root());
  auto sample = polyaccel::exporter::read_host_sample(model, tree.root().string());
  POLYACCEL_FUZZ_CHECK(sample.numa.size() <= model.numa_nodes.size());
  return 0;
}
