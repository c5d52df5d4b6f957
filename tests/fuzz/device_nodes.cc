// read_device_nodes: NVIDIA's minor number (/proc/driver/nvidia/gpus/<bdf>/information), the DRM
// and accel nodes under each device's sysfs directory, from a tree built from the input.
#include "kube/device_nodes.h"
#include "fuzz_support.h"
#include "tree_model.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  polyaccel::fuzz::FuzzTree tree(polyaccel::fuzz::as_string(data, size));
  polyaccel::HostModel model = polyaccel::fuzz::tree_model(tree.root());
  auto nodes = polyaccel::read_device_nodes(model, tree.root().string());
  POLYACCEL_FUZZ_CHECK(nodes.size() == model.accelerators.size());
  return 0;
}
