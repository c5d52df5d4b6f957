// read_sriov and read_physical_function: sriov_totalvfs/sriov_numvfs, the virtfnN links, each
// VF's NUMA node, netdevs, RDMA devices and driver, and a VF's physfn link; for every PCI
// function of a tree built from the input (fuzz_support.h's FuzzTree format).
#include "discover/sriov.h"
#include "fuzz_support.h"
#include "tree_model.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  polyaccel::fuzz::FuzzTree tree(polyaccel::fuzz::as_string(data, size));
  for (const auto& a : polyaccel::fuzz::addresses_in(tree.root() / "sys/bus/pci/devices")) {
    if (auto sriov = polyaccel::read_sriov(tree.root(), a)) {
      POLYACCEL_FUZZ_CHECK(sriov->vfs.size() <= 65536);
      // Counts as the kernel writes them, never wrapped from wider ones.
      POLYACCEL_FUZZ_CHECK(sriov->total_vfs <= 65535 && sriov->num_vfs <= sriov->total_vfs);
    }
    (void)polyaccel::read_physical_function(tree.root(), a);
  }
  return 0;
}
