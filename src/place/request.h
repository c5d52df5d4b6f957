// A placement request: vCPUs, memory, devices and OpenStack Nova's flavor extra specs, parsed
// and validated with Nova's meaning (../shared/reference/nova-placement.md). The same struct
// serves a bare-metal process (issue 9): fill it directly, no extra specs needed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/cpuset.h"
#include "core/error.h"
#include "place/pci_alias.h"

namespace polyaccel::place {

enum class CpuPolicy { shared, dedicated, mixed };
enum class ThreadPolicy { prefer, isolate, require };
enum class EmulatorThreadsPolicy { share, isolate };
// How a guest picks its page size (hw:mem_page_size).
enum class PageSizeRequest { none, small, large, any, exact };
// polyaccel:nic_affinity: how close each RDMA NIC must sit to the accelerator it serves.
enum class NicAffinity { none, pix, pxb, phb, node };

const char* to_string(CpuPolicy policy);
const char* to_string(ThreadPolicy policy);
const char* to_string(EmulatorThreadsPolicy policy);
const char* to_string(NicAffinity affinity);

// One guest NUMA cell: the vCPUs it holds and its memory.
struct GuestCell {
  std::vector<unsigned> vcpus;  // ascending
  std::uint64_t memory_bytes = 0;
};

struct DeviceRequest {
  PciAlias alias;
  unsigned count = 0;
};

struct Request {
  unsigned vcpus = 0;
  std::uint64_t memory_bytes = 0;
  CpuPolicy cpu_policy = CpuPolicy::shared;
  ThreadPolicy thread_policy = ThreadPolicy::prefer;  // meaningful for dedicated and mixed only
  CpuSet pinned_vcpus;  // dedicated: all vCPUs; mixed: the dedicated mask; shared: none
  EmulatorThreadsPolicy emulator_threads = EmulatorThreadsPolicy::share;
  // Nova moves emulator threads to cpu_shared_set only for an explicit "share"; unset, they
  // run on the guest's own PUs.
  bool emulator_threads_given = false;
  PageSizeRequest page_size = PageSizeRequest::none;
  std::uint64_t page_size_bytes = 0;  // for PageSizeRequest::exact
  // Nova builds a guest NUMA topology only for some specs; without one no host cell is chosen
  // and PCI NUMA policies do not apply.
  bool numa_topology = false;
  std::vector<GuestCell> cells;  // empty without a NUMA topology
  std::vector<DeviceRequest> devices;
  std::optional<PciNumaPolicy> pci_numa_policy;  // the flavor's; else each alias's, else legacy
  // polyaccel:rdma_nics: RDMA NICs in all, those requested through an alias included (Nova
  // passes only those). Without it, polyaccel:nic_affinity wants one per accelerator.
  unsigned rdma_nics = 0;
  bool rdma_nics_given = false;
  NicAffinity nic_affinity = NicAffinity::none;
};

// What a flavor file or the command line gives: sizes and the extra specs as written.
struct RequestInput {
  unsigned vcpus = 0;
  std::uint64_t memory_bytes = 0;
  std::vector<std::pair<std::string, std::string>> extra_specs;  // in the order given
};

// Validates every extra spec (unknown hw:/polyaccel:/pci_passthrough:/resources:/trait: keys,
// bad values, contradictions) and builds the Request. Errors name the key, as Nova's validator
// does, with Nova's exception name where Nova has one.
Result<Request> parse_request(const RequestInput& input, const std::vector<PciAlias>& aliases);

// Nova's page size spelling: "small", "large", "any", a bare number of KiB or an IEC size
// ("2MiB", "1GB" = 1 GiB, "1Gb" = 128 MiB). `key` names the input in the error.
Result<std::pair<PageSizeRequest, std::uint64_t>> parse_page_size(const std::string& key,
                                                                  const std::string& value);

// Nova's CPU spec for masks and hw:numa_cpus.N: "0-3,^2,5"; a spec of exclusions only
// ("^0-1") means every vCPU below `vcpus` except those.
std::optional<CpuSet> parse_cpu_spec(const std::string& text, unsigned vcpus);

// A process or guest that needs `pus` PUs pinned on one NUMA node with `memory_bytes` there and
// `devices`: the request issue 9's launcher builds (dedicated, one cell, prefer whole cores).
Request process_request(unsigned pus, std::uint64_t memory_bytes,
                        std::vector<DeviceRequest> devices = {});

}  // namespace polyaccel::place
