#include "audit/audit.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "audit/checks.h"
#include "audit/support.h"
#include "core/number.h"

namespace polyaccel {

const char* to_string(Severity severity) {
  switch (severity) {
    case Severity::info:
      return "info";
    case Severity::warning:
      return "warning";
    case Severity::critical:
      return "critical";
  }
  return "info";
}

std::optional<Severity> parse_severity(const std::string& text) {
  for (Severity s : {Severity::info, Severity::warning, Severity::critical}) {
    if (text == to_string(s)) return s;
  }
  return std::nullopt;
}

const char* to_string(HostRole role) {
  switch (role) {
    case HostRole::automatic:
      return "auto";
    case HostRole::hypervisor:
      return "hypervisor";
    case HostRole::compute:
      return "compute";
  }
  return "auto";
}

bool Remedy::runtime_is_complete() const {
  return !runtime.empty() && kernel_args.empty() && modprobe.empty() && modules_load.empty() &&
         systemd.empty();
}

namespace {

// "10de:2330,15b3:101b" → pairs of vendor and device ids.
std::vector<std::pair<std::uint16_t, std::uint16_t>> parse_id_list(const std::string& text) {
  std::vector<std::pair<std::uint16_t, std::uint16_t>> ids;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    // vendor:device[:subvendor...], each id 16 bits: "110de:2330" is no id, not 10de wrapped
    // from a wider one.
    std::string_view v = item;
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t'))
      v.remove_prefix(1);
    auto colon = v.find(':');
    if (colon == std::string_view::npos) continue;
    auto vendor = parse_hex(v.substr(0, colon), "vendor", 0xffff);
    auto device =
        parse_hex(v.substr(colon + 1, v.find(':', colon + 1) - colon - 1), "device", 0xffff);
    if (vendor && device) {
      ids.emplace_back(static_cast<std::uint16_t>(*vendor), static_cast<std::uint16_t>(*device));
    }
  }
  return ids;
}

// The vendor:device pairs that vfio-pci is told to claim, on the command line or in modprobe.d.
std::vector<std::pair<std::uint16_t, std::uint16_t>> vfio_ids(const TuningFacts& f) {
  std::vector<std::pair<std::uint16_t, std::uint16_t>> ids;
  for (const char* key : {"vfio-pci.ids", "vfio_pci.ids"}) {
    if (auto v = f.kernel_arg(key)) {
      auto more = parse_id_list(*v);
      ids.insert(ids.end(), more.begin(), more.end());
    }
  }
  auto it = f.modprobe_options.find("vfio_pci");
  if (it != f.modprobe_options.end()) {
    for (const auto& options : it->second) {
      std::istringstream words(options);
      for (std::string w; words >> w;) {
        if (w.rfind("ids=", 0) == 0) {
          auto more = parse_id_list(w.substr(4));
          ids.insert(ids.end(), more.begin(), more.end());
        }
      }
    }
  }
  return ids;
}

}  // namespace

bool AuditContext::is_passthrough(const PciAddress& a) const {
  return std::binary_search(passthrough.begin(), passthrough.end(), a);
}

const AcceleratorSample* AuditContext::sample(const PciAddress& a) const {
  for (const auto& s : samples) {
    auto addr = PciAddress::parse(s.pci_bus_id);
    if (addr && *addr == a) return &s;
  }
  return nullptr;
}

std::string AuditContext::device_name(const PciAddress& a) const {
  for (const auto& acc : model.accelerators) {
    if (acc.pci.address == a) return a.to_string() + " (" + acc.id + ")";
  }
  for (const auto& n : model.nics) {
    if (n.pci.address == a) return a.to_string() + " (" + n.id + ")";
  }
  return a.to_string();
}

AuditContext make_context(const AuditInput& input) {
  AuditContext c{input.model, input.facts, input.samples, input.intent, false, {}, {}};
  const TuningFacts& f = input.facts;

  std::set<PciAddress> passthrough(input.intent.passthrough.begin(),
                                   input.intent.passthrough.end());
  auto ids = vfio_ids(f);
  for (const auto& [addr, p] : f.pci) {
    bool claimed =
        std::find(ids.begin(), ids.end(), std::pair{p.vendor_id, p.device_id}) != ids.end();
    if (audit::is_vfio_driver(p.driver) || audit::is_vfio_driver(p.driver_override) || claimed) {
      passthrough.insert(addr);
    }
  }
  c.passthrough.assign(passthrough.begin(), passthrough.end());

  switch (input.intent.role) {
    case HostRole::hypervisor:
      c.hypervisor = true;
      break;
    case HostRole::compute:
      c.hypervisor = false;
      break;
    case HostRole::automatic:
      c.hypervisor = !c.passthrough.empty() || !ids.empty();
      break;
  }

  if (input.intent.pinned_cpus) {
    c.pinned = *input.intent.pinned_cpus;
  } else {
    audit::CpuIsolation iso = audit::cpu_isolation(f, input.model.pus);
    c.pinned = iso.scheduler | iso.nohz_full | iso.rcu_nocbs | iso.outside_systemd;
  }
  return c;
}

std::vector<Finding> audit_host(const HostModel& model, const TuningFacts& facts,
                                const std::vector<AcceleratorSample>& samples,
                                const AuditIntent& intent) {
  return run_audit({model, facts, samples, intent});
}

std::vector<std::string> all_finding_ids() {
  std::vector<std::string> ids;
  for (const auto& family : audit::check_families()) {
    ids.insert(ids.end(), family.ids.begin(), family.ids.end());
  }
  return ids;
}

std::vector<Finding> run_audit(const AuditInput& input, const std::vector<std::string>& only) {
  AuditContext context = make_context(input);
  std::vector<Finding> findings;
  for (const auto& family : audit::check_families()) {
    bool wanted = only.empty();
    for (const char* id : family.ids) {
      wanted = wanted || std::find(only.begin(), only.end(), id) != only.end();
    }
    if (!wanted) continue;
    for (auto& finding : family.run(context)) {
      if (!only.empty() && std::find(only.begin(), only.end(), finding.id) == only.end()) continue;
      findings.push_back(std::move(finding));
    }
  }
  std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
    if (a.severity != b.severity) return a.severity > b.severity;
    if (a.id != b.id) return a.id < b.id;
    return a.subject < b.subject;
  });
  return findings;
}

}  // namespace polyaccel
