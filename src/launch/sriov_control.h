// `polyaccel sriov set PF COUNT`: enables COUNT virtual functions on an SR-IOV physical function
// by writing its sriov_numvfs through a sysfs root.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/pci_address.h"

namespace polyaccel {

struct SriovChange {
  PciAddress physical_function;
  unsigned total_vfs = 0;
  unsigned previous_vfs = 0;
  unsigned requested_vfs = 0;
  std::vector<unsigned> writes;  // the values written to sriov_numvfs, in order (may be empty)
};

// The PCI address of a PF named by its address ("0000:60:00.0", "60:00.0"), a netdev ("ens1f0")
// or an RDMA device ("mlx5_0") under `root`.
Result<PciAddress> resolve_pci_function(const std::filesystem::path& root, const std::string& name);

// Checks everything first (the PF exists and has SR-IOV, COUNT is a number within
// sriov_totalvfs), then writes: the kernel refuses to change a non-zero count to another non-zero
// one, so a change between two non-zero counts writes 0 first. Nothing is written when a check
// fails or the count is already the requested one. The write is serialised with flock on the
// attribute, so two concurrent commands do not interleave their 0-then-N sequences.
Result<SriovChange> set_sriov_vf_count(const std::filesystem::path& root, const std::string& pf,
                                       const std::string& count);

}  // namespace polyaccel
