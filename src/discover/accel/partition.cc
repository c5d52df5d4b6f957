// The MIG geometry's lookups, and AMD's compute and memory partition modes through sysfs
// (/sys/bus/pci/devices/<BDF>/{current,available}_{compute,memory}_partition, as rocm_smi and
// AMD's device plugin read them).
#include <algorithm>
#include <cctype>
#include <fstream>

#include "core/file_io.h"
#include "core/pci_address.h"
#include "discover/accel/partition.h"

namespace polyaccel {

namespace {

constexpr std::int64_t kAmdVendorId = 0x1002;

std::vector<std::string> mode_list(const std::string& text) {
  std::vector<std::string> out;
  std::string word;
  for (char c : text + ",") {
    if (c == ',' || std::isspace(static_cast<unsigned char>(c))) {
      if (!word.empty()) out.push_back(word);
      word.clear();
    } else {
      word += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

std::string upper(std::string_view s) {
  std::string out;
  for (char c : s)
    out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::optional<AmdPartitionState> read_one(const std::filesystem::path& dir,
                                          const std::string& bus_id) {
  auto compute = read_first_line(dir / "current_compute_partition");
  if (!compute || read_int_file(dir / "vendor") != kAmdVendorId) return std::nullopt;
  AmdPartitionState s;
  s.pci_bus_id = bus_id;
  s.compute = upper(*compute);
  s.memory = upper(read_first_line(dir / "current_memory_partition").value_or(""));
  s.available_compute = mode_list(read_text_file(dir / "available_compute_partition").value_or(""));
  s.available_memory = mode_list(read_text_file(dir / "available_memory_partition").value_or(""));
  return s;
}

// A sysfs attribute takes one write of the whole value; it is not a file we may replace.
Status write_attribute(const std::filesystem::path& path, const std::string& value) {
  std::ofstream out(path, std::ios::out | std::ios::trunc);
  if (out) out << value << "\n";
  out.close();
  if (!out) return Error{ErrorCode::io, path.string(), "cannot write " + value, "run as root"};
  return Ok{};
}

}  // namespace

Result<std::vector<AmdPartitionState>> read_amd_partitions(const std::filesystem::path& root) {
  std::filesystem::path devices = root / "bus/pci/devices";
  std::error_code ec;
  std::vector<AmdPartitionState> out;
  if (!std::filesystem::is_directory(devices, ec)) return out;
  for (const auto& e : std::filesystem::directory_iterator(devices, ec)) {
    auto address = PciAddress::parse(e.path().filename().string());
    if (!address) continue;
    if (auto s = read_one(e.path(), address->to_string())) out.push_back(std::move(*s));
  }
  if (ec) return Error{ErrorCode::io, devices.string(), ec.message(), {}};
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.pci_bus_id < b.pci_bus_id; });
  return out;
}

unsigned amd_compute_partitions(std::string_view mode) {
  std::string m = upper(mode);
  if (m == "SPX") return 1;
  if (m == "DPX") return 2;
  if (m == "TPX") return 3;
  if (m == "QPX") return 4;
  if (m == "CPX") return 8;  // MI300X: one per XCD (MI300A has 6 XCDs; CPX still covers NPS1)
  return 0;
}

unsigned amd_memory_partitions(std::string_view mode) {
  std::string m = upper(mode);
  if (m == "NPS1") return 1;
  if (m == "NPS2") return 2;
  if (m == "NPS4") return 4;
  if (m == "NPS8") return 8;
  return 0;
}

Status check_amd_partition_pair(const AmdPartitionState& gpu, std::string_view compute_mode,
                                std::string_view memory_mode) {
  std::string compute = upper(compute_mode), memory = upper(memory_mode);
  auto listed = [](const std::vector<std::string>& modes, const std::string& m) {
    return modes.empty() || std::find(modes.begin(), modes.end(), m) != modes.end();
  };
  unsigned c = amd_compute_partitions(compute), m = amd_memory_partitions(memory);
  if (c == 0)
    return bad_input(compute, "unknown compute partition mode", "SPX, DPX, TPX, QPX, CPX");
  if (m == 0) return bad_input(memory, "unknown memory partition mode", "NPS1, NPS2, NPS4, NPS8");
  if (!listed(gpu.available_compute, compute)) {
    return bad_input(compute,
                     "not offered by " + gpu.pci_bus_id + " (available_compute_partition)");
  }
  if (!listed(gpu.available_memory, memory)) {
    return bad_input(memory, "not offered by " + gpu.pci_bus_id + " (available_memory_partition)");
  }
  if (c % m != 0) {
    std::vector<std::string> pairs;
    for (const char* mode : {"SPX", "DPX", "TPX", "QPX", "CPX"}) {
      if (amd_compute_partitions(mode) % m == 0 && listed(gpu.available_compute, mode)) {
        pairs.emplace_back(mode);
      }
    }
    std::string with;
    for (const auto& p : pairs)
      with += (with.empty() ? "" : ", ") + p;
    return bad_input(
        compute + "/" + memory,
        "each compute partition must lie in one memory partition: " + std::to_string(c) +
            " compute partitions over " + std::to_string(m) + " memory partitions",
        memory + " pairs with " + (with.empty() ? "no offered compute mode" : with));
  }
  return Ok{};
}

Result<AmdPartitionState> set_amd_partition(const std::filesystem::path& root,
                                            const std::string& pci_bus_id,
                                            const std::string& compute, const std::string& memory) {
  auto address = PciAddress::parse(pci_bus_id);
  if (!address) return bad_input(pci_bus_id, "not a PCI address");
  std::filesystem::path dir = root / "bus/pci/devices" / address->to_string();
  auto state = read_one(dir, address->to_string());
  if (!state) {
    return bad_input(pci_bus_id, "no AMD GPU with partition modes at " + dir.string());
  }
  std::string want_compute = compute.empty() ? state->compute : upper(compute);
  std::string want_memory = memory.empty() ? state->memory : upper(memory);
  if (auto ok = check_amd_partition_pair(*state, want_compute, want_memory); !ok) return ok.error();
  if (want_memory != state->memory) {
    if (auto w = write_attribute(dir / "current_memory_partition", want_memory); !w) {
      return w.error();
    }
  }
  if (want_compute != state->compute) {
    if (auto w = write_attribute(dir / "current_compute_partition", want_compute); !w) {
      return w.error();
    }
  }
  auto after = read_one(dir, address->to_string());
  if (!after || after->compute != want_compute || after->memory != want_memory) {
    return Error{ErrorCode::io, dir.string(),
                 "the driver kept " + (after ? after->compute + "/" + after->memory : "nothing") +
                     " after writing " + want_compute + "/" + want_memory,
                 "stop the processes using the GPU and retry"};
  }
  return *after;
}

}  // namespace polyaccel
