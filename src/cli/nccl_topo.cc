// `polyaccel nccl-topo [-o FILE]`: the NCCL topology file of this host (NCCL_TOPO_FILE).
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/file_io.h"
#include "core/json.h"
#include "core/strings.h"
#include "place/allocation_store.h"
#include "render/nccl.h"
#include "render/nccl_guest.h"

namespace polyaccel::cli {

namespace {

// GPUDirect RDMA needs a peer-memory module (or dma-buf, which a sysfs root cannot show): say
// gdr="1" only when the module is loaded, otherwise leave NCCL to decide.
std::optional<bool> gpu_direct_from(const std::string& root, const std::string& mode) {
  if (mode == "on") return true;
  if (mode == "off") return false;
  if (root.empty()) return std::nullopt;
  std::error_code ec;
  for (const char* m : {"sys/module/nvidia_peermem", "sys/module/nv_peer_mem"}) {
    if (std::filesystem::exists(std::filesystem::path(root) / m, ec)) return true;
  }
  return std::nullopt;
}

// --placement NAME --libvirt FILE: the guest's view of the host.
Result<NcclGuestView> guest_view(const HostModel& model, const NcclTopoCliOptions& cli) {
  if (cli.libvirt.empty()) {
    return bad_input("--placement " + cli.placement,
                     "needs --libvirt FILE, the guest's domain XML");
  }
  place::AllocationStore store(cli.state);
  auto state = store.load();
  if (!state) return state.error();
  const place::Placement* placement = state->find(cli.placement);
  if (!placement) {
    return bad_input("--placement " + cli.placement, "is not committed in " + cli.state,
                     "commit it with polyaccel place --commit --name NAME");
  }
  auto xml = read_input_file(cli.libvirt, kMaxDomainXmlBytes, "libvirt domain XML");
  if (!xml) return xml.error();
  for (const auto& d : placement->devices) {
    auto a = PciAddress::parse(d.pci_bus_id);
    bool known = a && (model.accelerator(d.pci_bus_id) || model.nic(d.id));
    if (!known) {
      return bad_input("--placement " + cli.placement,
                       "holds " + d.pci_bus_id + ", which this host does not have");
    }
  }
  return render::nccl_guest_view(*placement, cli.libvirt, *xml);
}

}  // namespace

int run_nccl_topo(const GlobalOptions& options, const NcclTopoCliOptions& cli, std::ostream& out) {
  auto model = discover_host(options.discover);
  if (!model) return fail(model.error());
  NcclTopoOptions render_options;
  render_options.gpu_direct = gpu_direct_from(filesystem_root(options.discover), cli.gdr);
  if (!cli.placement.empty()) {
    auto guest = guest_view(*model, cli);
    if (!guest) return fail(guest.error());
    render_options.guest = *guest;
  } else if (!cli.libvirt.empty()) {
    return fail(bad_input("--libvirt", "needs --placement NAME, the guest's committed placement"));
  }
  std::string xml = render_nccl_topology(*model, render_options);
  if (!cli.output.empty()) {
    if (auto s = write_file_atomically(cli.output, xml); !s) return fail(s.error());
  }
  if (options.json) {
    nlohmann::json j = {
        {"schema_version", 1},
        {"output", cli.output.empty() ? nlohmann::json(nullptr) : nlohmann::json(cli.output)},
        {"xml", xml}};
    out << json_text(j) << "\n";
  } else if (cli.output.empty()) {
    out << xml;
  } else {
    out << "wrote " << printable(cli.output) << " (export NCCL_TOPO_FILE=" << printable(cli.output)
        << ")\n";
  }
  return kExitOk;
}

}  // namespace polyaccel::cli
