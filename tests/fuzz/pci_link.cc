// read_pci_link: current/max link speed and width of each PCI function of a tree built from the
// input (fuzz_support.h's FuzzTree format).
#include "discover/hwloc_source.h"
#include "fuzz_support.h"
#include "tree_model.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  polyaccel::fuzz::FuzzTree tree(polyaccel::fuzz::as_string(data, size));
  polyaccel::HostModel model = polyaccel::fuzz::tree_model(tree.root());
  for (auto& nic : model.nics) {
    polyaccel::detail::read_pci_link(nic.pci, tree.root());
    const auto& link = nic.pci.link;
    POLYACCEL_FUZZ_CHECK(link.width <= 32 && link.max_width <= 32);
    // Finite, never negative, at most 256 GT/s: "nan GT/s" or "1e308" is no speed.
    POLYACCEL_FUZZ_CHECK(link.speed_gts >= 0 && link.speed_gts <= 256);
    POLYACCEL_FUZZ_CHECK(link.max_speed_gts >= 0 && link.max_speed_gts <= 256);
  }
  return 0;
}
