// parse_pci_alias_file (--pci-alias-file: a JSON array or nova.conf `alias = {...}` lines) and
// parse_pci_alias_option (--pci-alias NAME=VENDOR:PRODUCT[:POLICY]) on each line of the input.
#include <sstream>

#include "fuzz_support.h"
#include "place/pci_alias.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text = polyaccel::fuzz::as_string(data, size);
  auto aliases = polyaccel::place::parse_pci_alias_file("aliases.json", text);
  if (!aliases) {
    POLYACCEL_FUZZ_CHECK(aliases.error().message().find("aliases.json") != std::string::npos);
  }
  std::istringstream in(text);
  std::string line;
  for (int i = 0; i < 16 && std::getline(in, line); ++i) {
    (void)polyaccel::place::parse_pci_alias_option(line);
  }
  return 0;
}
