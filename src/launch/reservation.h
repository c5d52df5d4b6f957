// `polyaccel run --reserve NAME`: the run's GPUs, PUs and NUMA nodes are chosen by the placement
// engine (place/fit) and recorded in the allocation store while CMD runs. Who holds each run
// reservation is kept beside the state in "<state>.runs" (the supervisor's pid, its start time
// and the boot id), written under the store's lock, so a reservation whose supervisor is gone
// (killed, host rebooted) is reclaimed by the next reservation.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/host_model.h"
#include "place/placement.h"

namespace polyaccel {

struct ProcessIdentity {
  int pid = 0;
  std::uint64_t start_time = 0;  // /proc/PID/stat field 22, clock ticks since boot
  std::string boot_id;           // /proc/sys/kernel/random/boot_id
  bool operator==(const ProcessIdentity&) const = default;
};

// The identity of a live process; nullopt when it is gone (or is a zombie).
std::optional<ProcessIdentity> process_identity(int pid);
// True while that very process (not a later one with the recycled pid) runs.
bool is_alive(const ProcessIdentity& owner);

struct RunReservationRequest {
  std::string name;
  unsigned gpus = 0;         // 0: CPUs only
  unsigned pus_per_gpu = 0;  // with gpus > 0
  unsigned pus = 0;          // with gpus == 0
  std::uint16_t gpu_vendor_id = 0;
  // Flavor extra specs for the engine (--spec KEY=VALUE): hw:mem_page_size, hw:numa_nodes,
  // polyaccel:nic_affinity, ...; a key given here replaces the run's own default for it.
  std::vector<std::pair<std::string, std::string>> extra_specs;
  // Where libvirt's running domains are read (place/libvirt_domains.h); empty: none.
  std::filesystem::path libvirt_status_dir;
};

struct RunReservation {
  place::Placement placement;
  std::vector<std::string> gpu_ids;    // HostModel ids of the reserved accelerators
  CpuSet cpus;                         // the pinned PUs
  std::vector<std::string> reclaimed;  // stale run reservations removed on the way
};

// PUs a run should hold per GPU: the smallest share of a GPU node's PUs among its GPUs.
unsigned pus_per_gpu(const HostModel& model, const CpuSet& allowed);

// Fits the request with the placement engine (fewest NUMA cells first, GPUs local to them),
// records it under `name` with `owner`, after reclaiming run reservations whose owner is gone.
// Exit-code contract: bad_input for a taken name or a broken state, `unsupported` for no fit.
Result<RunReservation> reserve_for_run(const HostModel& model, const std::filesystem::path& state,
                                       const RunReservationRequest& request,
                                       const ProcessIdentity& owner);

// The GPUs the engine would give this request now, recording nothing (plain `run --gpus N`);
// empty when it finds no fit.
Result<std::vector<std::string>> engine_gpu_choice(const HostModel& model,
                                                   const std::vector<place::Placement>& placements,
                                                   const RunReservationRequest& request);

// Removes `name` if `owner` still holds it (a reclaimed and re-used name is left alone).
Status release_run(const std::filesystem::path& state, const std::string& name,
                   const ProcessIdentity& owner);

}  // namespace polyaccel
