// One collector per family of metrics, each in its own file and listed once in collectors.cc
// (DESIGN.md: explicit lists, not self-registration). A collector turns the snapshots the
// background samplers published into metric families; it never reads a device or a file itself,
// so a scrape only serialises and never waits on a vendor call.
#pragma once

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <prometheus/metric_family.h>

#include "core/agent_parts.h"
#include "core/dra_status.h"
#include "core/error.h"
#include "core/pod_assignments.h"
#include "discover/accel/monitor.h"
#include "exporter/host_sampler.h"

namespace polyaccel::exporter {

// Name sets `--compat` chooses from.
// otel: OpenTelemetry's hw.* names with UTF-8 characters, on /metrics only to a scraper that
// negotiates them (accept_header.h) and only when asked for by name: Prometheus 3 negotiates them
// by default, and they would double every accelerator's series of its existing jobs.
enum class NameSet { polyaccel, dcgm, amd, habana, otel };
const char* to_string(NameSet set);
// "dcgm,amd,habana,polyaccel", "all" or "none" (only polyaccel_*): an Error names the bad word.
Result<std::set<NameSet>> parse_compat(const std::string& text);

// Everything one scrape reads: immutable snapshots taken once at its start.
struct ScrapeInput {
  std::chrono::system_clock::time_point now;
  std::string hostname;
  std::string cluster_name;                      // AMD's cluster_name label
  std::string dcgm_hostname_label = "Hostname";  // or "hostname" (ExporterOptions)
  std::set<NameSet> names;
  std::shared_ptr<const AcceleratorSnapshot> accelerators;  // never null
  std::shared_ptr<const HostSample> host;                   // never null
  std::shared_ptr<const PodAssignments> pods;               // never null; empty without kubelet
  std::shared_ptr<const DraStatus> dra;                     // null: no DRA driver runs
  std::vector<AgentPart> parts;                             // core/agent_parts.h
};

using Families = std::vector<prometheus::MetricFamily>;

class Collector {
 public:
  virtual ~Collector() = default;
  virtual std::string name() const = 0;  // the `collector` label of the self-metrics
  // Appends its families to `out`. An Error makes it show as success 0 for this scrape; what it
  // appended is kept.
  virtual Status collect(const ScrapeInput& in, Families& out) const = 0;
};

// collectors.cc: every collector, in exposition order.
std::vector<std::unique_ptr<Collector>> make_all_collectors();

// Factories, one per file.
std::unique_ptr<Collector> make_accelerator_collector();  // accelerator.cc: polyaccel_accelerator_*
std::unique_ptr<Collector> make_dcgm_collector();         // dcgm.cc: DCGM-exporter's names
std::unique_ptr<Collector> make_amd_collector();          // amd.cc: device-metrics-exporter's
std::unique_ptr<Collector> make_habana_collector();       // habana.cc: habanalabs_*
std::unique_ptr<Collector> make_numa_memory_collector();  // numa_memory.cc
std::unique_ptr<Collector> make_hugepages_collector();    // hugepages.cc
std::unique_ptr<Collector> make_pcie_link_collector();    // pcie_link.cc
std::unique_ptr<Collector> make_rdma_port_collector();    // rdma_port.cc: IB/RoCE ports
std::unique_ptr<Collector> make_kubelet_collector();      // kubelet.cc: pod-resources link state
std::unique_ptr<Collector> make_dra_collector();          // dra.cc: the DRA driver's state
std::unique_ptr<Collector> make_agent_parts_collector();  // agent_parts.cc: each thread's work
std::unique_ptr<Collector> make_dra_claims_collector();   // dra_claims.cc: claims' CPUs, memory
std::unique_ptr<Collector> make_placement_state_collector();  // placement_state.cc
std::unique_ptr<Collector> make_audit_findings_collector();   // audit_findings.cc

}  // namespace polyaccel::exporter
