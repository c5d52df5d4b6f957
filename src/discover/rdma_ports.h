// Per-port InfiniBand/RoCE state and counters of an RDMA device, read through a root from
// sys/class/infiniband/<dev>/ports/<port>/ as node_exporter's infiniband collector reads them:
// counters/ (the IB PortCounters), hw_counters/ (the driver's RoCE and transport counters),
// state, phys_state and rate. Every number is range-checked; a file that is not a regular file,
// is too large or does not hold a number is no reading (the rest of the port still is).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace polyaccel {

struct RdmaPortReading {
  std::string device;                           // "mlx5_0"
  unsigned port = 0;                            // 1, 2, ...
  std::optional<unsigned> state;                // "4: ACTIVE" -> 4 (IB PortState 0..5)
  std::optional<unsigned> phys_state;           // "5: LinkUp" -> 5 (IB PortPhysicalState 0..7)
  std::optional<double> rate_bytes_per_second;  // "200 Gb/sec (4X HDR)" -> 25e9
  // counters/ file name -> value as the kernel gives it (port_rcv_data in 4-byte words).
  std::map<std::string, std::uint64_t> counters;
  std::map<std::string, std::uint64_t> hw_counters;  // hw_counters/ file name -> value
};

// The number before ':' of a state or phys_state file ("4: ACTIVE"), at most `max`.
std::optional<unsigned> parse_rdma_port_state(std::string_view text, unsigned max);
// A rate file ("200 Gb/sec (4X HDR)", "2.5 Gb/sec (1X SDR)") in bytes per second, as
// node_exporter's node_infiniband_rate_bytes_per_second; nullopt for anything else.
std::optional<double> parse_rdma_port_rate(std::string_view text);
// One counter file: a decimal 64-bit value on its first line; nullopt otherwise.
std::optional<std::uint64_t> parse_rdma_counter(std::string_view text);

// Whether `name` may be used as one path component of sys/class/infiniband (a device name from
// the topology: letters, digits, '_', '-', '.', not "." or "..").
bool plain_rdma_device_name(std::string_view name);

// Every port of `device` under `root` ("/" for the live host), in port order; empty when the
// device has no ports directory under the root, the root is empty or the name is not plain.
std::vector<RdmaPortReading> read_rdma_ports(const std::string& root, const std::string& device);

}  // namespace polyaccel
