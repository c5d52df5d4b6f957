// AcceleratorBackend: the one interface behind which each vendor library lives (DESIGN.md, rule
// 4). Nothing outside discover/accel/ names a vendor API. Implementations: nvml.cc, amd_smi.cc,
// rocm.cc, hlml.cc; the list of them is backends.cc.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/accel_sample.h"
#include "core/error.h"
#include "core/host_model.h"

namespace polyaccel {

// What the loader found in the library: the path it opened and which of the symbols we use are
// missing (the backend then works with what exists).
struct LibraryReport {
  std::string path;
  std::vector<std::string> missing_symbols;
  std::string note;  // why this library, when a vendor has two ("amd-smi absent: ...")
};

class AcceleratorBackend {
 public:
  virtual ~AcceleratorBackend() = default;

  virtual std::string name() const = 0;  // "nvml", "amd-smi", "rocm-smi", "hlml"
  virtual Vendor vendor() const = 0;

  // dlopens the library and initialises it. Error code not_found when the library is absent
  // (the normal case on a host without that vendor), another code when it is broken.
  virtual Status open() = 0;
  virtual const LibraryReport& library() const = 0;

  // Every device the library sees, keyed by PCI bus id ("0000:3b:00.0"); peer_links holds its
  // NVLink/XGMI peers.
  struct Device {
    std::string pci_bus_id;
    AcceleratorInventory inventory;
    std::vector<PeerLink> peer_links;
    // Logical devices the library shows on this PCI function (an MI300X in CPX mode shows 8);
    // 0 when the library does not say.
    unsigned partitions = 0;
  };
  virtual Result<std::vector<Device>> devices() = 0;

  // Reads every sample field of one device now. A device that no longer answers gives a
  // sample with reachable = false, not an Error.
  virtual AcceleratorSample sample(const std::string& pci_bus_id) = 0;

  // Events that arrived since the last call, waiting at most `timeout` for the first one.
  virtual std::vector<AcceleratorEvent> poll_events(std::chrono::milliseconds timeout) = 0;
};

}  // namespace polyaccel
