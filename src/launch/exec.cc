#include "launch/exec.h"

#include <numa.h>
#include <numaif.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace polyaccel {

CpuSet current_affinity() {
  CpuSet out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (unsigned i = 0; i < CPU_SETSIZE; ++i) {
    if (CPU_ISSET(i, &set)) out.set(i);
  }
  return out;
}

std::vector<unsigned> current_memory_nodes() {
  std::vector<unsigned> out;
  if (::numa_available() < 0) return out;
  bitmask* allowed = ::numa_get_mems_allowed();
  if (!allowed) return out;
  const int max_node = ::numa_max_possible_node();
  for (int n = 0; n <= max_node; ++n) {
    if (::numa_bitmask_isbitset(allowed, static_cast<unsigned>(n)))
      out.push_back(static_cast<unsigned>(n));
  }
  ::numa_bitmask_free(allowed);
  return out;
}

namespace {

Status set_affinity(const CpuSet& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (unsigned pu : cpus.to_vector()) {
    if (pu >= CPU_SETSIZE)
      return Error{ErrorCode::unsupported, "CPU " + std::to_string(pu), "above CPU_SETSIZE", ""};
    CPU_SET(pu, &set);
  }
  if (::sched_setaffinity(0, sizeof set, &set) != 0) {
    return Error{ErrorCode::io, "sched_setaffinity(" + cpus.to_list() + ")", std::strerror(errno),
                 "the CPUs may be outside this container's cpuset"};
  }
  return Ok{};
}

Status bind_memory(const std::vector<unsigned>& nodes) {
  if (nodes.empty()) return Ok{};
  if (::numa_available() < 0) {
    return Error{ErrorCode::unsupported, "memory binding", "the kernel has no NUMA support", ""};
  }
  const unsigned max_node = static_cast<unsigned>(::numa_max_possible_node()) + 1;
  std::vector<unsigned long> mask(
      (max_node + 8 * sizeof(unsigned long) - 1) / (8 * sizeof(unsigned long)), 0);
  for (unsigned n : nodes) {
    if (n >= max_node)
      return Error{ErrorCode::bad_input, "NUMA node " + std::to_string(n), "not on this host", ""};
    mask[n / (8 * sizeof(unsigned long))] |= 1ul << (n % (8 * sizeof(unsigned long)));
  }
  if (::set_mempolicy(MPOL_BIND, mask.data(), max_node + 1) != 0) {
    return Error{ErrorCode::io, "set_mempolicy(MPOL_BIND)", std::strerror(errno),
                 "the nodes may be outside this container's cpuset.mems"};
  }
  return Ok{};
}

}  // namespace

Status apply_binding(const LaunchPlan& plan) {
  if (auto s = set_affinity(plan.cpus); !s) return s;
  if (auto s = bind_memory(plan.mems); !s) return s;
  for (const auto& [key, value] : plan.env) {
    if (::setenv(key.c_str(), value.c_str(), 1) != 0) {
      return Error{ErrorCode::io, key, std::strerror(errno), ""};
    }
  }
  return Ok{};
}

Error exec_bound(const LaunchPlan& plan) {
  if (auto s = apply_binding(plan); !s) return s.error();
  std::vector<char*> argv;
  for (const auto& a : plan.argv)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  return Error{ErrorCode::not_found, plan.argv.front(), std::strerror(errno), ""};
}

}  // namespace polyaccel
