// Flavor files: what `openstack flavor show -f json` prints (properties as a dict or as Nova's
// "key='value', ..." string) or our own YAML:
//   name: gpu.h100.1
//   vcpus: 16
//   memory: 64GiB          # or ram: 65536 (MiB, as Nova)
//   extra_specs: {hw:cpu_policy: dedicated, pci_passthrough:alias: "h100:1"}
//   pci_aliases: {h100: "10de:2330"}
#pragma once

#include <string>
#include <vector>

#include "place/pci_alias.h"
#include "place/request.h"

namespace polyaccel::place {

struct FlavorFile {
  std::string name;
  RequestInput request;
  std::vector<PciAlias> aliases;
};

// `text` is the file's content; `path` names it in errors.
Result<FlavorFile> parse_flavor_file(const std::string& path, const std::string& text);

// Nova's properties string: "hw:cpu_policy='dedicated', hw:numa_nodes='2'".
Result<std::vector<std::pair<std::string, std::string>>> parse_properties_string(
    const std::string& input, const std::string& text);

}  // namespace polyaccel::place
