// gpu.persistence, gpu.ecc, gpu.mig-pending, gpu.clocks-throttled, gpu.row-remap-pending: what
// the vendor library says of each accelerator (inventory and one sample). Silent when no backend
// answered for a device.
#include <algorithm>

#include "audit/checks.h"
#include "core/strings.h"

namespace polyaccel::audit {

namespace {

bool is_nvml(const AcceleratorInventory& inv) {
  return inv.backend == "nvml";
}

// "nvidia-smi -i 3 " for NVML devices (the library's own index), nothing otherwise.
std::string smi(const AcceleratorInventory& inv) {
  return "nvidia-smi -i " + std::to_string(inv.index) + " ";
}

Finding base(const AuditContext& c, const Accelerator& a, const char* id, Severity severity) {
  Finding f;
  f.id = id;
  f.severity = severity;
  f.subject = c.device_name(a.pci.address);
  return f;
}

// Throttle reasons that mean the GPU runs slower than it should; gpu_idle, sync_boost and the
// display/application clock settings are normal.
constexpr const char* kSlowdowns[] = {"hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown",
                                      "hw_power_brake_slowdown"};

void check_one(const AuditContext& c, const Accelerator& a, Findings& out) {
  const AcceleratorInventory& inv = *a.inventory;
  if (inv.persistence_mode && !*inv.persistence_mode) {
    Finding f = base(c, a, "gpu.persistence", Severity::warning);
    f.observed = "persistence mode off";
    f.expected = "persistence mode on (nvidia-persistenced)";
    f.remedy.summary =
        "without it the driver tears the GPU down when the last client exits and every job "
        "start pays seconds of initialisation: run nvidia-persistenced";
    f.remedy.commands = {"systemctl enable --now nvidia-persistenced"};
    if (is_nvml(inv)) f.remedy.commands.push_back(smi(inv) + "-pm 1");
    out.push_back(std::move(f));
  }
  if (inv.ecc_enabled && !*inv.ecc_enabled) {
    Finding f = base(c, a, "gpu.ecc", Severity::warning);
    f.observed = std::string("ECC off") +
                 (inv.ecc_pending && *inv.ecc_pending ? " (on after the next reset)" : "");
    f.expected = "ECC on: memory errors are corrected and reported, not silent";
    f.remedy.summary = "turn ECC on and reset the GPU (or reboot)";
    if (is_nvml(inv)) f.remedy.commands = {smi(inv) + "-e 1", smi(inv) + "-r"};
    out.push_back(std::move(f));
  } else if (inv.ecc_enabled && inv.ecc_pending && *inv.ecc_pending != *inv.ecc_enabled) {
    Finding f = base(c, a, "gpu.ecc", Severity::warning);
    f.observed = "ECC on, off after the next reset";
    f.expected = "ECC to stay on";
    f.remedy.summary = "cancel the pending change before the GPU is reset";
    if (is_nvml(inv)) f.remedy.commands = {smi(inv) + "-e 1"};
    out.push_back(std::move(f));
  }
  if (inv.mig_enabled && inv.mig_pending && *inv.mig_enabled != *inv.mig_pending) {
    Finding f = base(c, a, "gpu.mig-pending", Severity::warning);
    f.observed = std::string("MIG mode ") + (*inv.mig_enabled ? "on" : "off") + ", " +
                 (*inv.mig_pending ? "on" : "off") + " pending a GPU reset";
    f.expected = "the MIG mode asked for in effect";
    f.remedy.summary = "reset the GPU with no process on it (or reboot) to apply the MIG mode";
    if (is_nvml(inv)) f.remedy.commands = {smi(inv) + "-r"};
    out.push_back(std::move(f));
  }
  const AcceleratorSample* s = c.sample(a.pci.address);
  if (!s || !s->reachable) return;
  std::vector<std::string> slow, capped;
  for (const auto& name : s->throttle_reason_names) {
    if (std::find(std::begin(kSlowdowns), std::end(kSlowdowns), name) != std::end(kSlowdowns)) {
      slow.push_back(name);
    } else if (name == "sw_power_cap") {
      capped.push_back(name);
    }
  }
  if (!slow.empty() || !capped.empty()) {
    Finding f =
        base(c, a, "gpu.clocks-throttled", slow.empty() ? Severity::info : Severity::warning);
    std::vector<std::string> all = slow;
    all.insert(all.end(), capped.begin(), capped.end());
    f.observed = "clocks held down by " + join(all, ", ");
    if (s->sm_clock_mhz) f.observed += " (SM " + std::to_string(*s->sm_clock_mhz) + " MHz)";
    f.expected = "no thermal or hardware slowdown";
    f.remedy.summary =
        slow.empty()
            ? "the GPU runs at its power limit" +
                  (inv.power_limit_watts
                       ? " (" + std::to_string(int(*inv.power_limit_watts)) + " W)"
                       : std::string()) +
                  ": raise it if it is below the board's default, or accept it"
            : "check cooling (fans, airflow, inlet temperature) and power delivery (PSUs, power "
              "brake signal from the BMC)";
    if (is_nvml(inv)) f.remedy.commands = {smi(inv) + "-q -d PERFORMANCE,TEMPERATURE,POWER"};
    out.push_back(std::move(f));
  }
  if (s->remapped_rows_failure && *s->remapped_rows_failure) {
    Finding f = base(c, a, "gpu.row-remap-pending", Severity::critical);
    f.observed = "row remapping failed";
    f.expected = "memory rows remapped successfully";
    f.remedy.summary = "the GPU ran out of spare rows: drain it and have it replaced";
    out.push_back(std::move(f));
  } else if (s->remapped_rows_pending && *s->remapped_rows_pending) {
    Finding f = base(c, a, "gpu.row-remap-pending", Severity::warning);
    f.observed = "a memory row remap is pending";
    f.expected = "no remap pending";
    f.remedy.summary = "drain the GPU and reset it so that the remap takes effect";
    if (is_nvml(inv)) f.remedy.commands = {smi(inv) + "-r"};
    out.push_back(std::move(f));
  }
}

}  // namespace

Findings check_gpu(const AuditContext& c) {
  Findings out;
  for (const auto& a : c.model.accelerators) {
    if (a.inventory && !c.is_passthrough(a.pci.address)) check_one(c, a, out);
  }
  return out;
}

}  // namespace polyaccel::audit
