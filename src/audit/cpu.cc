// cpu.governor, cpu.isolation.
#include <map>

#include "audit/checks.h"
#include "audit/support.h"
#include "core/strings.h"

namespace polyaccel::audit {

namespace {

// systemd writes CPU lists with blanks: "0-1 56-57".
std::string systemd_list(const CpuSet& cpus) {
  std::string list = cpus.to_list();
  for (auto& ch : list) {
    if (ch == ',') ch = ' ';
  }
  return list;
}

void check_governor(const AuditContext& c, Findings& out) {
  if (c.facts.governors.empty()) return;  // no cpufreq (a VM, or the firmware decides)
  CpuSet serving;
  for (const auto& a : c.model.accelerators) {
    serving |= a.pci.local_cpus.empty() ? c.model.pus : a.pci.local_cpus;
  }
  serving |= c.pinned;
  if (serving.empty()) return;
  std::map<std::string, CpuSet> by_governor;
  for (const auto& [cpu, governor] : c.facts.governors) {
    if (serving.test(cpu) && governor != "performance") by_governor[governor].set(cpu);
  }
  for (const auto& [governor, cpus] : by_governor) {
    Finding f;
    f.id = "cpu.governor";
    f.severity = Severity::warning;
    f.subject = cpus_subject(cpus);
    f.observed = "scaling_governor " + governor;
    f.expected = "scaling_governor performance on CPUs that feed accelerators or pinned guests";
    f.remedy.summary =
        "a power-saving governor adds latency to every kernel launch and interrupt: set "
        "performance (at boot too, e.g. cpupower.service or a tuned profile)";
    for (unsigned cpu : cpus.to_vector()) {
      f.remedy.runtime.push_back(
          {"sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cpufreq/scaling_governor",
           "performance"});
    }
    f.remedy.commands.push_back("cpupower -c " + cpus.to_list() + " frequency-set -g performance");
    out.push_back(std::move(f));
  }
}

void check_isolation(const AuditContext& c, Findings& out) {
  if (!c.facts.kernel_cmdline_known) return;
  CpuIsolation iso = cpu_isolation(c.facts, c.model.pus);
  CpuSet pinned = c.pinned;
  CpuSet housekeeping = c.model.pus - pinned;
  if (pinned.empty()) {
    if (!c.hypervisor) return;
    housekeeping = default_housekeeping(c.model);
    pinned = c.model.pus - housekeeping;
    if (pinned.empty()) return;
    Finding f;
    f.id = "cpu.isolation";
    f.severity = Severity::warning;
    f.subject = "host";
    f.observed =
        "no CPUs set apart for pinned guests (no isolcpus, nohz_full, rcu_nocbs or "
        "systemd CPUAffinity)";
    f.expected = "guest CPUs kept free of host services, timer ticks and RCU callbacks";
    f.remedy.summary = "keep the host on " + housekeeping.to_list() + " (one core a node) and " +
                       "give " + pinned.to_list() + " to guests";
    f.remedy.systemd.push_back("CPUAffinity=" + systemd_list(housekeeping));
    f.remedy.kernel_args = {"nohz_full=" + pinned.to_list(), "rcu_nocbs=" + pinned.to_list()};
    out.push_back(std::move(f));
    return;
  }
  CpuSet no_scheduler = pinned - (iso.scheduler | iso.outside_systemd);
  CpuSet no_nohz = pinned - iso.nohz_full;
  CpuSet no_rcu = pinned - iso.rcu_nocbs;
  if (no_scheduler.empty() && no_nohz.empty() && no_rcu.empty()) return;
  Finding f;
  f.id = "cpu.isolation";
  f.severity = no_scheduler.empty() ? Severity::info : Severity::warning;
  f.subject = cpus_subject(pinned);
  std::vector<std::string> missing;
  if (!no_scheduler.empty()) {
    missing.push_back("host services may run on " + no_scheduler.to_list() +
                      " (not in isolcpus, inside systemd CPUAffinity)");
    f.remedy.systemd.push_back("CPUAffinity=" + systemd_list(housekeeping));
  }
  if (!no_nohz.empty()) {
    missing.push_back("timer tick on " + no_nohz.to_list());
    f.remedy.kernel_args.push_back("nohz_full=" + (iso.nohz_full | pinned).to_list());
  }
  if (!no_rcu.empty()) {
    missing.push_back("RCU callbacks on " + no_rcu.to_list());
    f.remedy.kernel_args.push_back("rcu_nocbs=" + (iso.rcu_nocbs | pinned).to_list());
  }
  f.observed = join(missing, "; ");
  f.expected = "CPUs meant for pinned work isolated from host services, ticks and RCU";
  f.remedy.summary = "keep host services on " + housekeeping.to_list() +
                     " (systemd CPUAffinity) and take ticks and RCU work off the pinned CPUs";
  out.push_back(std::move(f));
}

}  // namespace

Findings check_cpu(const AuditContext& c) {
  Findings out;
  check_governor(c, out);
  check_isolation(c, out);
  return out;
}

}  // namespace polyaccel::audit
