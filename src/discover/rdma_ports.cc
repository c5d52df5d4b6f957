#include "discover/rdma_ports.h"

#include <algorithm>
#include <filesystem>

#include "core/file_io.h"
#include "core/number.h"

namespace polyaccel {
namespace {

namespace fs = std::filesystem;

// A sysfs attribute of a port holds one short line; anything longer is not one.
constexpr std::uint64_t kMaxPortFileBytes = 4096;

std::optional<std::string> read_port_file(const fs::path& path) {
  auto text = read_input_file(path, kMaxPortFileBytes, "RDMA port attribute");
  if (!text) return std::nullopt;
  return std::move(*text);
}

std::string_view first_line_trimmed(std::string_view text) {
  text = text.substr(0, text.find('\n'));
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t'))
    text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r'))
    text.remove_suffix(1);
  return text;
}

// Every counter file of `dir`: name -> value; names are the kernel's (a known list names them in
// the collector; others are read too and the collector decides).
std::map<std::string, std::uint64_t> read_counter_dir(const fs::path& dir) {
  std::map<std::string, std::uint64_t> out;
  for (const auto& name : sorted_entry_names(dir)) {
    auto text = read_port_file(dir / name);
    if (!text) continue;
    if (auto v = parse_rdma_counter(*text)) out[name] = *v;
  }
  return out;
}

}  // namespace

std::optional<unsigned> parse_rdma_port_state(std::string_view text, unsigned max) {
  text = first_line_trimmed(text);
  auto colon = text.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  auto v = parse_integer<unsigned>(text.substr(0, colon), "state", 0, max);
  if (!v) return std::nullopt;
  return *v;
}

std::optional<double> parse_rdma_port_rate(std::string_view text) {
  text = first_line_trimmed(text);
  auto space = text.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  std::string_view unit = text.substr(space + 1);
  if (!unit.starts_with("Gb/sec")) return std::nullopt;
  // The fastest IB link today is 4X XDR at 800 Gb/s; 100 Tb/s leaves room and refuses garbage.
  auto gbps = parse_finite(text.substr(0, space), "rate", 0, 100000);
  if (!gbps) return std::nullopt;
  return *gbps * 1e9 / 8;
}

std::optional<std::uint64_t> parse_rdma_counter(std::string_view text) {
  auto v = parse_unsigned(first_line_trimmed(text), "counter");
  if (!v) return std::nullopt;
  return *v;
}

bool plain_rdma_device_name(std::string_view name) {
  if (name.empty() || name == "." || name == ".." || name.size() > 64) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

std::vector<RdmaPortReading> read_rdma_ports(const std::string& root, const std::string& device) {
  std::vector<RdmaPortReading> out;
  if (root.empty() || !plain_rdma_device_name(device)) return out;
  const fs::path ports = fs::path(root) / "sys/class/infiniband" / device / "ports";
  for (const auto& entry : sorted_entry_names(ports)) {
    // Port numbers are 1..255 (an 8-bit IB port number); anything else is not a port.
    auto number = parse_integer<unsigned>(entry, "port", 1, 255);
    if (!number) continue;
    const fs::path dir = ports / entry;
    RdmaPortReading r;
    r.device = device;
    r.port = *number;
    if (auto t = read_port_file(dir / "state")) r.state = parse_rdma_port_state(*t, 5);
    if (auto t = read_port_file(dir / "phys_state")) r.phys_state = parse_rdma_port_state(*t, 7);
    if (auto t = read_port_file(dir / "rate")) r.rate_bytes_per_second = parse_rdma_port_rate(*t);
    r.counters = read_counter_dir(dir / "counters");
    r.hw_counters = read_counter_dir(dir / "hw_counters");
    out.push_back(std::move(r));
  }
  // sorted_entry_names sorts as text ("10" before "2"); ports go in number order.
  std::sort(out.begin(), out.end(),
            [](const RdmaPortReading& a, const RdmaPortReading& b) { return a.port < b.port; });
  return out;
}

}  // namespace polyaccel
