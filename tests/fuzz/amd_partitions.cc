// read_amd_partitions: current/available compute and memory partitions of AMD GPUs under
// sys/bus/pci/devices, from a tree built from the input (FuzzTree format).
#include "discover/accel/partition.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  polyaccel::fuzz::FuzzTree tree(polyaccel::fuzz::as_string(data, size));
  auto partitions = polyaccel::read_amd_partitions(tree.root() / "sys");
  if (!partitions) POLYACCEL_FUZZ_CHECK(!partitions.error().message().empty());
  return 0;
}
