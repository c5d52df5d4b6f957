// read_hugepages: each NUMA node's hugepages-<size>kB/{nr,free}_hugepages, from a tree built from
// the input (fuzz_support.h's FuzzTree format).
#include "discover/hwloc_source.h"
#include "fuzz_support.h"
#include "tree_model.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  polyaccel::fuzz::FuzzTree tree(polyaccel::fuzz::as_string(data, size));
  polyaccel::HostModel model = polyaccel::fuzz::tree_model(tree.root());
  for (auto& node : model.numa_nodes) {
    polyaccel::detail::read_hugepages(node, tree.root());
    for (const auto& h : node.hugepages)
      POLYACCEL_FUZZ_CHECK(h.size_bytes > 0);
  }
  return 0;
}
