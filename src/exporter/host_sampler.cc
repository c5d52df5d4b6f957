#include "exporter/host_sampler.h"

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "audit/audit.h"
#include "core/agent_parts.h"
#include "core/file_io.h"
#include "core/number.h"
#include "discover/discover.h"
#include "discover/links.h"
#include "discover/tuning.h"
#include "place/allocation_store.h"
#include "place/host_view.h"
#include "place/libvirt_domains.h"

namespace polyaccel::exporter {
namespace {

namespace fs = std::filesystem;

// nodeN/meminfo: "Node 0 MemTotal:       263842612 kB".
std::optional<std::uint64_t> meminfo_bytes(const std::string& text, const std::string& key) {
  size_t pos = text.find(" " + key + ":");
  if (pos == std::string::npos) return std::nullopt;
  const char* start = text.c_str() + pos + key.size() + 2;
  char* end = nullptr;
  errno = 0;
  unsigned long long kib = std::strtoull(start, &end, 10);
  // strtoull saturates at 2^64: a value that large, or one that overflows in bytes, is no reading.
  if (end == start || errno == ERANGE || kib > (~0ULL >> 10)) return std::nullopt;
  return static_cast<std::uint64_t>(kib) * 1024;
}

// nodeN/numastat: "numa_hit 123\nnuma_miss 0\n...".
std::map<std::string, std::uint64_t> parse_numastat(const std::string& text) {
  std::map<std::string, std::uint64_t> out;
  std::istringstream in(text);
  std::string key, value;
  // Read as text and parsed whole: istream's >> into an unsigned takes "-1" for 2^64-1.
  while (in >> key >> value) {
    if (auto v = parse_integer<std::uint64_t>(value, key)) out[key] = *v;
  }
  return out;
}

// The ports of every RDMA device of the model's NICs, labelled with the NIC, its node and the
// accelerators NCCL pairs it with.
std::vector<RdmaPortSample> read_rdma_port_samples(const HostModel& host, const std::string& root) {
  std::vector<RdmaPortSample> out;
  for (const auto& nic : host.nics) {
    if (nic.rdma_devices.empty()) continue;
    std::string gpus;
    for (const auto& a : host.accelerators) {
      for (const Nic* n : nccl_nics(host, a)) {
        if (n->id == nic.id) gpus += (gpus.empty() ? "" : ",") + a.id;
      }
    }
    const auto node = dram_node(host, nic.pci);
    for (const auto& device : nic.rdma_devices) {
      for (auto& r : read_rdma_ports(root, device))
        out.push_back({nic.id, nic.pci.address.to_string(), node, gpus, std::move(r)});
    }
  }
  return out;
}

}  // namespace

HostSample read_host_sample(const HostModel& host, const std::string& root) {
  HostSample s;
  s.time = std::chrono::system_clock::now();
  HostModel fresh = host;
  refresh_from_sysfs(fresh, root);
  if (!root.empty()) {
    for (const auto& n : fresh.numa_nodes) {
      fs::path dir =
          fs::path(root) / "sys/devices/system/node" / ("node" + std::to_string(n.os_index));
      NumaNodeSample ns;
      ns.node = n.os_index;
      if (auto text = read_text_file(dir / "meminfo")) {
        ns.memory_total_bytes = meminfo_bytes(*text, "MemTotal");
        ns.memory_free_bytes = meminfo_bytes(*text, "MemFree");
      }
      if (auto text = read_text_file(dir / "numastat")) ns.numastat = parse_numastat(*text);
      s.numa.push_back(std::move(ns));
    }
    s.rdma_ports = read_rdma_port_samples(fresh, root);
  }
  s.host = std::make_shared<const HostModel>(std::move(fresh));
  return s;
}

PlacementSample read_placement(const HostModel& host, const std::string& state_path,
                               const std::string& libvirt_status_dir) {
  PlacementSample s;
  s.time = std::chrono::system_clock::now();
  // The default policy (every PU pinnable): the agent does not know Nova's cpu_dedicated_set.
  auto view = place::build_host_view(host, place::HostPolicy{});
  if (!view) {
    s.error = view.error().message();
    return s;
  }
  auto state = place::AllocationStore(state_path, libvirt_status_dir).load();
  if (!state) {
    s.error = state.error().message();
    return s;
  }
  auto usage = place::usage_of(*view, state->all());
  if (!usage) {
    s.error = state_path + ": " + usage.error().message();
    return s;
  }
  s.allocations = state->placements.size() + state->domains.size();
  for (size_t i = 0; i < view->cells.size(); ++i) {
    const place::HostCell& cell = view->cells[i];
    const place::CellUsage& used = usage->cells[i];
    PlacementNodeSample n;
    n.node = cell.node;
    n.pinnable_pus = cell.pcpus.count();
    n.pinned_pus = (used.held & cell.pcpus).count();
    n.memory_bytes = used.memory_used;
    for (size_t p = 1; p < cell.pools.size(); ++p) {  // pools[0] is the base page
      std::uint64_t held = p < used.pages_used.size() ? used.pages_used[p] : 0;
      n.hugepages.push_back({cell.pools[p].size_bytes, held});
    }
    s.nodes.push_back(std::move(n));
  }
  for (const auto& d : view->devices) {
    s.devices.push_back({d.id, d.pci_bus_id, d.numa_node, usage->devices.count(d.pci_bus_id) > 0});
  }
  return s;
}

AuditSample run_host_audit(const HostModel& host, const std::string& root,
                           const std::vector<AcceleratorSample>& samples) {
  AuditSample s;
  auto start = std::chrono::steady_clock::now();
  s.time = std::chrono::system_clock::now();
  TuningFacts facts = read_tuning_facts(root);
  for (const auto& f : audit_host(host, facts, samples))
    ++s.counts[{f.id, f.severity}];
  for (const auto& u : audit_coverage({host, facts, samples, {}}).unchecked)
    s.unchecked.insert(u.id);
  s.ids = all_finding_ids();
  s.duration_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

std::vector<AcceleratorSample> last_samples(const AcceleratorSnapshot& snapshot) {
  std::vector<AcceleratorSample> out;
  for (const auto& d : snapshot.devices) {
    if (d.sample) out.push_back(*d.sample);
  }
  return out;
}

HostSampler::HostSampler(HostModel host, std::string root, std::chrono::milliseconds interval)
    : host_(std::move(host)),
      root_(std::move(root)),
      interval_(interval),
      last_audit_(std::make_shared<const AuditSample>()) {
  auto first = std::make_shared<HostSample>();
  first->host = std::make_shared<const HostModel>(host_);
  snapshot_ = std::move(first);
}

void HostSampler::set_extras(HostSamplerExtras extras) {
  std::lock_guard lock(mu_);
  extras_ = std::move(extras);
}

HostSampler::~HostSampler() {
  stop();
}

void HostSampler::start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable() || stop_) return;
  sample_once();
  thread_ = std::thread([this] { run_part("host-sampler", [this] { run(); }); });
}

void HostSampler::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<const HostSample> HostSampler::snapshot() const {
  std::lock_guard lock(snapshot_mu_);
  return snapshot_;
}

// One step: the host's files and the placement state every time, the audit when it is due.
// Runs on the sampler's thread only (and once in start(), before that thread exists).
void HostSampler::sample_once() {
  auto next = std::make_shared<HostSample>(read_host_sample(host_, root_));
  if (!extras_.state_path.empty()) {
    // The guests libvirt runs on this host (its status files under the same root) count too.
    const std::string libvirt =
        root_.empty() ? std::string()
                      : (std::filesystem::path(root_) / place::kLibvirtStatusDir).string();
    next->placement = std::make_shared<const PlacementSample>(
        read_placement(*next->host, extras_.state_path, libvirt));
  }
  auto now = std::chrono::steady_clock::now();
  std::shared_ptr<const HostModel> model;
  if (extras_.accelerator_model) model = extras_.accelerator_model();
  // Also due as soon as the accelerators' inventory first comes: the first audit (at start)
  // ran before the vendor libraries were open.
  bool audit_due =
      extras_.audit_interval.count() > 0 && !root_.empty() &&
      (last_audit_->time.time_since_epoch().count() == 0 ||
       now - last_audit_at_ >= extras_.audit_interval || (model && !audited_accelerators_));
  if (audit_due) {
    std::vector<AcceleratorSample> samples;
    if (extras_.accelerator_samples) samples = extras_.accelerator_samples();
    audited_accelerators_ = model != nullptr;
    last_audit_ = std::make_shared<const AuditSample>(
        run_host_audit(model ? *model : *next->host, root_, samples));
    last_audit_at_ = now;
  }
  next->audit = last_audit_;
  std::lock_guard swap(snapshot_mu_);
  snapshot_ = std::move(next);
}

void HostSampler::run() {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, interval_, [this] { return stop_; });
  while (!stop_) {
    lock.unlock();
    sample_once();
    lock.lock();
    cv_.wait_for(lock, interval_, [this] { return stop_; });
  }
}

}  // namespace polyaccel::exporter
