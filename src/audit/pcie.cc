// pcie.link-degraded, pcie.acs-redirect.
#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>

#include "audit/checks.h"
#include "audit/support.h"

namespace polyaccel::audit {

namespace {

std::string link_text(double speed, unsigned width) {
  std::ostringstream s;
  s << speed << " GT/s x" << width;
  return s.str();
}

void check_link(const AuditContext& c, const PciDevice& pci, bool accelerator, Findings& out) {
  const PciLink& l = pci.link;
  if (l.speed_gts <= 0 || l.width == 0 || l.max_speed_gts <= 0 || l.max_width == 0) return;
  // The link trains to the lower of the device's and the slot's capability: a Gen5 card in a
  // Gen4 slot is not degraded.
  double best_speed = l.max_speed_gts;
  unsigned best_width = l.max_width;
  if (const PciFunctionFacts* p = c.facts.pci_function(pci.address)) {
    if (p->port_max_speed_gts > 0) best_speed = std::min(best_speed, p->port_max_speed_gts);
    if (p->port_max_width > 0) best_width = std::min(best_width, p->port_max_width);
  }
  bool narrow = l.width < best_width;
  bool slow = l.speed_gts + 0.01 < best_speed;
  if (!narrow && !slow) return;
  Finding f;
  f.id = "pcie.link-degraded";
  f.subject = c.device_name(pci.address);
  f.observed = "link " + link_text(l.speed_gts, l.width);
  f.expected = link_text(best_speed, best_width);
  // GPUs lower their link speed when idle; a narrow link, or a slow one under load, is real.
  const AcceleratorSample* s = c.sample(pci.address);
  bool busy = s && s->gpu_utilization_percent && *s->gpu_utilization_percent > 0;
  if (accelerator && !narrow && !busy) {
    f.severity = Severity::info;
    f.observed += " while idle";
    f.remedy.summary =
        "accelerators slow their link when idle: check again under load (lspci -vv -s " +
        pci.address.to_string() +
        " | grep LnkSta); if it stays low, reseat the card or check "
        "the slot's link speed setting in the firmware";
  } else {
    f.severity = Severity::warning;
    f.remedy.summary =
        "the link trained below what device and slot support: reseat the card, "
        "check risers and cables, the firmware's slot speed setting and AER "
        "errors (journalctl -k | grep -i aer)";
  }
  f.remedy.commands.push_back("lspci -vv -s " + pci.address.to_string() +
                              " | grep -E 'LnkCap|LnkSta'");
  out.push_back(std::move(f));
}

// The bridges peer traffic between a and b crosses below their common ancestor.
std::vector<PciAddress> bridges_between(const PciFunctionFacts& a, const PciFunctionFacts& b) {
  size_t common = 0;
  while (common < a.upstream_bridges.size() && common < b.upstream_bridges.size() &&
         a.upstream_bridges[common] == b.upstream_bridges[common])
    ++common;
  if (common == 0) return {};  // through the root complex: ACS on root ports does not matter
  std::vector<PciAddress> out(a.upstream_bridges.begin() + common, a.upstream_bridges.end());
  out.insert(out.end(), b.upstream_bridges.begin() + common, b.upstream_bridges.end());
  return out;
}

constexpr std::uint16_t kRedirectBits =
    kAcsP2pRequestRedirect | kAcsP2pCompletionRedirect | kAcsP2pEgressControl;

std::string acs_text(std::uint16_t control) {
  static const char* names[] = {"SrcValid",    "TransBlk",   "ReqRedir",   "CmpltRedir",
                                "UpstreamFwd", "EgressCtrl", "DirectTrans"};
  std::string s = "ACSCtl:";
  for (int i = 0; i < 7; ++i)
    s += std::string(" ") + names[i] + ((control >> i) & 1 ? "+" : "-");
  return s;
}

void check_acs(const AuditContext& c, Findings& out) {
  // Pairs that talk over PCIe peer-to-peer: a GPU and its closest NICs, two GPUs under one
  // switch without NVLink/XGMI between them.
  std::vector<std::pair<const PciDevice*, const PciDevice*>> pairs;
  const auto& m = c.model;
  for (size_t i = 0; i < m.accelerators.size(); ++i) {
    const auto& a = m.accelerators[i];
    if (c.is_passthrough(a.pci.address)) continue;  // ACS isolates guests: leave it
    for (const auto& nic_id : a.closest_nics) {
      if (const Nic* n = m.nic(nic_id)) pairs.emplace_back(&a.pci, &n->pci);
    }
    for (size_t j = i + 1; j < m.accelerators.size(); ++j) {
      auto ia = m.links.index_of(a.id);
      auto ib = m.links.index_of(m.accelerators[j].id);
      if (!ia || !ib) continue;
      LinkLevel level = m.links.at(*ia, *ib).level;
      if (level == LinkLevel::pix || level == LinkLevel::pxb) {
        pairs.emplace_back(&a.pci, &m.accelerators[j].pci);
      }
    }
  }
  std::set<PciAddress> reported, unreadable;
  for (const auto& [x, y] : pairs) {
    const PciFunctionFacts* fx = c.facts.pci_function(x->address);
    const PciFunctionFacts* fy = c.facts.pci_function(y->address);
    if (!fx || !fy) continue;
    for (const auto& bridge : bridges_between(*fx, *fy)) {
      const PciFunctionFacts* fb = c.facts.pci_function(bridge);
      if (!fb) continue;
      if (!fb->acs_readable) {
        unreadable.insert(bridge);
        continue;
      }
      if (!fb->acs_control || !(*fb->acs_control & kRedirectBits)) continue;
      if (!reported.insert(bridge).second) continue;
      std::uint16_t cleared = *fb->acs_control & static_cast<std::uint16_t>(~kRedirectBits);
      char value[8];
      std::snprintf(value, sizeof value, "%04x", cleared);
      Finding f;
      f.id = "pcie.acs-redirect";
      f.severity = Severity::critical;
      f.subject = bridge.to_string();
      f.observed = acs_text(*fb->acs_control) + " on the path between " +
                   c.device_name(x->address) + " and " + c.device_name(y->address);
      f.expected = "ReqRedir- CmpltRedir- EgressCtrl- so peer traffic stays in the switch";
      f.remedy.summary =
          "ACS redirect sends GPUDirect peer traffic up to the root complex (slow, or hangs "
          "with the IOMMU on): clear it now with setpci and at boot with pci=disable_acs_redir";
      f.remedy.commands.push_back("setpci -s " + bridge.to_string() + " ECAP_ACS+0x6.w=" + value);
      f.remedy.kernel_args.push_back("pci=disable_acs_redir=" + bridge.to_string());
      out.push_back(std::move(f));
    }
  }
  if (!unreadable.empty()) {
    Finding f;
    f.id = "audit.limits";
    f.severity = Severity::info;
    f.subject = "pcie.acs-redirect";
    f.observed = std::to_string(unreadable.size()) +
                 " bridges between GPUs and NICs show no extended config space (256 bytes or "
                 "fewer)";
    f.expected = "the 4096-byte extended config space, to read the ACS capability";
    // On the live host only a reader with CAP_SYS_ADMIN gets past the first 64 bytes (the
    // kernel's pci_read_config), root without it too: the agent of the least-privilege component
    // (docs/kubernetes.md). A capture holds what its gatherer read.
    f.remedy.summary =
        c.facts.root == "/"
            ? "run the audit as root with CAP_SYS_ADMIN to check ACS on these bridges (the "
              "kernel shows any other reader 64 bytes, root in an unprivileged container too, "
              "as the agent of the least-privilege component: run `polyaccel audit` on the host)"
            : "this capture holds 256 of the 4096 config-space bytes of these bridges (gathered "
              "without root): gather it again as root (sudo hwloc-gather-topology --io, or sudo "
              "cp of sys/bus/pci/devices/*/config) to check ACS";
    out.push_back(std::move(f));
  }
}

}  // namespace

Findings check_pcie(const AuditContext& c) {
  Findings out;
  for (const auto& a : c.model.accelerators)
    check_link(c, a.pci, true, out);
  for (const auto& n : c.model.nics)
    check_link(c, n.pci, false, out);
  check_acs(c, out);
  return out;
}

}  // namespace polyaccel::audit
