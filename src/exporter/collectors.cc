// Every collector the agent runs, listed once, in exposition order (DESIGN.md).
#include "exporter/collector.h"

#include "core/strings.h"

namespace polyaccel::exporter {

std::vector<std::unique_ptr<Collector>> make_all_collectors() {
  std::vector<std::unique_ptr<Collector>> all;
  all.push_back(make_accelerator_collector());
  all.push_back(make_dcgm_collector());
  all.push_back(make_amd_collector());
  all.push_back(make_habana_collector());
  all.push_back(make_numa_memory_collector());
  all.push_back(make_hugepages_collector());
  all.push_back(make_pcie_link_collector());
  all.push_back(make_rdma_port_collector());
  all.push_back(make_placement_state_collector());
  all.push_back(make_audit_findings_collector());
  all.push_back(make_kubelet_collector());
  all.push_back(make_dra_collector());
  all.push_back(make_dra_claims_collector());
  all.push_back(make_agent_parts_collector());
  return all;
}

const char* to_string(NameSet set) {
  switch (set) {
    case NameSet::polyaccel:
      return "polyaccel";
    case NameSet::dcgm:
      return "dcgm";
    case NameSet::amd:
      return "amd";
    case NameSet::habana:
      return "habana";
    case NameSet::otel:
      return "otel";
  }
  return "polyaccel";
}

Result<std::set<NameSet>> parse_compat(const std::string& text) {
  // "all" is every set of the default names; otel is asked for by name (collector.h).
  const std::vector<NameSet> every = {NameSet::polyaccel, NameSet::dcgm, NameSet::amd,
                                      NameSet::habana};
  std::set<NameSet> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string word =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (word == "all") {
      out.insert(every.begin(), every.end());
    } else if (word == "none") {
      out.insert(NameSet::polyaccel);
    } else if (word == "otel") {
      out.insert(NameSet::otel);
    } else {
      bool known = false;
      for (NameSet s : every) {
        if (word == to_string(s)) {
          out.insert(s);
          known = true;
        }
      }
      if (!known) {
        return bad_input("--compat " + text, "unknown name set '" + word + "'",
                         "use a comma list of polyaccel, dcgm, amd, habana, otel, or all / none");
      }
    }
  }
  return out;
}

}  // namespace polyaccel::exporter
