// The environment that carries a DRA claim's CPUs and memory nodes into its containers: the
// claim's CDI spec sets it (dra/cdi.cc) and the NRI plugin reads it at container creation
// (nri/cpu_policy.h), so neither module depends on the other. Values in the kernel's list format.
#pragma once

namespace polyaccel {

inline constexpr const char* kCpusEnvPrefix = "POLYACCEL_CPUS_";  // + claim uid = CPU list
inline constexpr const char* kMemsEnvPrefix = "POLYACCEL_MEMS_";  // + claim uid = node list

}  // namespace polyaccel
