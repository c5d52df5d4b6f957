// A PCI function address, "0000:3b:00.0" (domain:bus:device.function), as sysfs and NVML print it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace polyaccel {

struct PciAddress {
  std::uint32_t domain = 0;
  std::uint8_t bus = 0;
  std::uint8_t device = 0;
  std::uint8_t function = 0;

  // Accepts "0000:3b:00.0", "3b:00.0" (domain 0) and NVML's 8-digit domain "00000000:3B:00.0".
  static std::optional<PciAddress> parse(std::string_view text);
  // Lower case, 4-digit domain: "0000:3b:00.0".
  std::string to_string() const;
  // Same physical device, any function: the two ports of a dual-port NIC.
  bool same_device(const PciAddress& o) const {
    return domain == o.domain && bus == o.bus && device == o.device;
  }
  auto operator<=>(const PciAddress&) const = default;
};

}  // namespace polyaccel
