// domain_placement: libvirt's status XML of a running domain (/run/libvirt/qemu/<name>.xml, the
// guests Nova runs) read with libxml2 as a placement, then counted on a host as place does.
#include "fuzz_support.h"
#include "place/host_view.h"
#include "place/libvirt_domains.h"

namespace {

// Two NUMA nodes of 4 PUs with 2 MiB and 1 GiB pools, built by hand: the target reads no file
// but its input.
const polyaccel::place::HostView& view() {
  static const polyaccel::place::HostView v = [] {
    polyaccel::place::HostView out;
    for (unsigned n = 0; n < 2; ++n) {
      polyaccel::place::HostCell c;
      c.node = n;
      for (unsigned pu = 4 * n; pu < 4 * n + 4; ++pu) {
        c.pcpus.set(pu);
        c.shared_cpus.set(pu);
        c.cores.push_back(polyaccel::CpuSet{pu});
      }
      c.memory_bytes = std::uint64_t{16} << 30;
      c.pools = {{4096, 1u << 20}, {std::uint64_t{2} << 20, 1024}, {std::uint64_t{1} << 30, 4}};
      out.cells.push_back(c);
    }
    out.cell_distances = {{10, 20}, {20, 10}};
    return out;
  }();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto d = polyaccel::place::domain_placement("status.xml", polyaccel::fuzz::as_string(data, size));
  if (!d) {
    POLYACCEL_FUZZ_CHECK(d.error().message().find("status.xml") != std::string::npos);
    return 0;
  }
  const auto& p = d->placement;
  POLYACCEL_FUZZ_CHECK(p.owner == polyaccel::place::kLibvirtOwner);
  POLYACCEL_FUZZ_CHECK(p.name.starts_with(polyaccel::place::kLibvirtNamePrefix));
  POLYACCEL_FUZZ_CHECK(p.vcpus >= 1);
  for (const auto& c : p.cells) {
    for (const auto& [vcpu, pu] : c.pinning)
      POLYACCEL_FUZZ_CHECK(vcpu < p.vcpus && p.held_pus.test(pu));
  }
  // A foreign guest is counted, never refused, whatever it holds.
  auto usage = polyaccel::place::usage_of(view(), {p});
  POLYACCEL_FUZZ_CHECK(usage.ok());
  return 0;
}
