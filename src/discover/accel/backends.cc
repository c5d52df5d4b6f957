#include "discover/accel/backends.h"

#include <algorithm>

#include "core/strings.h"
#include "discover/links.h"

namespace polyaccel {

std::vector<std::unique_ptr<AcceleratorBackend>> make_all_backends() {
  std::vector<std::unique_ptr<AcceleratorBackend>> all;
  all.push_back(make_nvml_backend());
  all.push_back(make_amd_backend());
  all.push_back(make_hlml_backend());
  return all;
}

std::vector<AcceleratorBackendStatus> merge_accelerators(
    HostModel& model, std::vector<std::unique_ptr<AcceleratorBackend>>& backends) {
  std::vector<AcceleratorBackendStatus> statuses;
  bool changed = false;
  for (auto& backend : backends) {
    Status opened = backend->open();
    // Named after open(): the AMD entry becomes "amd-smi" or "rocm-smi" there.
    AcceleratorBackendStatus st{backend->name(), false, {}};
    const std::string& note = backend->library().note;
    if (!opened) {
      st.detail = opened.error().code == ErrorCode::not_found
                      ? "absent (" + opened.error().message() + ")"
                      : "failed: " + opened.error().message();
      if (!note.empty()) st.detail += "; " + note;
      statuses.push_back(std::move(st));
      continue;
    }
    auto devices = backend->devices();
    if (!devices) {
      st.detail = "failed: " + devices.error().message();
      statuses.push_back(std::move(st));
      continue;
    }
    st.present = true;
    st.detail = std::to_string(devices->size()) + " devices from " + backend->library().path;
    if (!backend->library().missing_symbols.empty()) {
      st.detail += ", missing " + join(backend->library().missing_symbols, ", ");
    }
    if (!note.empty()) st.detail += "; " + note;
    for (auto& dev : *devices) {
      auto addr = PciAddress::parse(dev.pci_bus_id);
      if (!addr) continue;
      auto it = std::find_if(model.accelerators.begin(), model.accelerators.end(),
                             [&](const Accelerator& a) { return a.pci.address == *addr; });
      if (it == model.accelerators.end()) {
        // The library sees a device that the topology source did not (an XML of another host
        // is never merged: only the live host calls this).
        Accelerator a;
        a.vendor = backend->vendor();
        a.pci.address = *addr;
        model.accelerators.push_back(std::move(a));
        it = model.accelerators.end() - 1;
      }
      if (!dev.inventory.product_name.empty()) it->name = dev.inventory.product_name;
      it->inventory = std::move(dev.inventory);
      if (dev.partitions > 0) it->partitions = dev.partitions;
      for (const auto& p : dev.peer_links) {
        auto same = std::find_if(it->peer_links.begin(), it->peer_links.end(),
                                 [&](const PeerLink& q) { return q.peer == p.peer; });
        if (same == it->peer_links.end()) {
          it->peer_links.push_back(p);
        } else {
          *same = p;  // the vendor library knows better than a stored hwloc matrix
        }
      }
      changed = true;
    }
    statuses.push_back(std::move(st));
  }
  if (changed) {
    std::sort(
        model.accelerators.begin(), model.accelerators.end(),
        [](const Accelerator& a, const Accelerator& b) { return a.pci.address < b.pci.address; });
    for (size_t i = 0; i < model.accelerators.size(); ++i) {
      model.accelerators[i].id = "gpu" + std::to_string(i);
    }
    model.links = compute_link_matrix(model);
    assign_closest_nics(model);
  }
  return statuses;
}

}  // namespace polyaccel
