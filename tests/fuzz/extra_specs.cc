// parse_request: a flavor's extra specs with its vCPUs and memory, as `place` and flavor files
// hand them over. Input: a first line "VCPUS MEMORY" (e.g. "16 64GiB"), then one "key=value"
// extra spec per line.
#include <sstream>

#include "core/byte_size.h"
#include "core/strings.h"
#include "fuzz_support.h"
#include "place/pci_alias.h"
#include "place/request.h"

namespace {

const std::vector<polyaccel::place::PciAlias>& aliases() {
  static const std::vector<polyaccel::place::PciAlias> list = [] {
    std::vector<polyaccel::place::PciAlias> out;
    for (const char* option : {"h100=10de:2330:required", "a100=10de:20b0", "mlx=15b3"}) {
      auto alias = polyaccel::place::parse_pci_alias_option(option);
      if (!alias) std::abort();
      out.push_back(*alias);
    }
    return out;
  }();
  return list;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(polyaccel::fuzz::as_string(data, size));
  polyaccel::place::RequestInput input;
  input.vcpus = 8;
  input.memory_bytes = 16ull << 30;
  std::string line;
  if (std::getline(in, line)) {
    size_t blank = line.find(' ');
    // --vcpus is a count of at most six digits on the command line (CLI11 reads an unsigned).
    if (auto v = polyaccel::parse_count(line.substr(0, blank))) input.vcpus = *v;
    if (blank != std::string::npos) {
      if (auto m = polyaccel::parse_byte_size(line.substr(blank + 1))) input.memory_bytes = *m;
    }
  }
  while (std::getline(in, line)) {
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    input.extra_specs.emplace_back(line.substr(0, eq), line.substr(eq + 1));
  }
  auto request = polyaccel::place::parse_request(input, aliases());
  if (request) {
    // A NUMA topology splits exactly the vCPUs and the memory asked for.
    if (!request->cells.empty()) {
      std::size_t vcpus = 0;
      std::uint64_t memory = 0;
      for (const auto& c : request->cells) {
        vcpus += c.vcpus.size();
        memory += c.memory_bytes;
      }
      POLYACCEL_FUZZ_CHECK(vcpus == request->vcpus);
      POLYACCEL_FUZZ_CHECK(memory == request->memory_bytes);
    }
  } else {
    POLYACCEL_FUZZ_CHECK(!request.error().message().empty());
  }
  return 0;
}
