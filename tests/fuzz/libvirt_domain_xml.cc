// nccl_guest_view: a guest's libvirt domain XML (`nccl-topo --libvirt FILE`, as `virsh dumpxml`
// prints it) read with libxml2, its PCI controllers numbered as the guest firmware does.
#include "fuzz_support.h"
#include "render/nccl_guest.h"

namespace {

// A guest without a NUMA topology holding two host functions, as `place` commits it.
const polyaccel::place::Placement& placement() {
  static const polyaccel::place::Placement p = [] {
    polyaccel::place::Placement out;
    out.name = "g";
    out.vcpus = 8;
    for (const char* bdf : {"0000:cb:00.0", "0000:da:00.0"}) {
      polyaccel::place::DevicePlacement d;
      d.pci_bus_id = bdf;
      d.kind = "accelerator";
      out.devices.push_back(d);
    }
    return out;
  }();
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto view = polyaccel::render::nccl_guest_view(placement(), "domain.xml",
                                                 polyaccel::fuzz::as_string(data, size));
  if (view) {
    POLYACCEL_FUZZ_CHECK(view->addresses.size() == placement().devices.size());
  } else {
    POLYACCEL_FUZZ_CHECK(view.error().message().find("domain.xml") != std::string::npos);
  }
  return 0;
}
