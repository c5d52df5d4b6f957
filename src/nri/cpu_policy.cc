#include "nri/cpu_policy.h"

#include "core/strings.h"

namespace polyaccel::nri {

Result<std::optional<ClaimedCpus>> claimed_cpus(const std::vector<std::string>& env,
                                                const CpuSet& online, const CpuSet& nodes) {
  std::optional<ClaimedCpus> out;
  for (const auto& kv : env) {
    const bool is_cpus = kv.starts_with(kCpusEnvPrefix), is_mems = kv.starts_with(kMemsEnvPrefix);
    if (!is_cpus && !is_mems) continue;
    const auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = kv.substr(0, eq);
    auto set = CpuSet::parse_list(std::string_view(kv).substr(eq + 1));
    const CpuSet& within = is_cpus ? online : nodes;
    if (!set || set->empty() || !within.contains(*set)) {
      return bad_input("the container's " + printable(name),
                       "'" + printable(kv.substr(eq + 1, 64)) + "' is not a set of this node's " +
                           (is_cpus ? "CPUs (" : "NUMA nodes (") + within.to_list() + ")");
    }
    if (!out) out.emplace();
    (is_cpus ? out->cpus : out->mems) |= *set;
  }
  if (out && out->cpus.empty()) {
    return bad_input("the container's " + std::string(kMemsEnvPrefix) + "*",
                     "memory nodes without CPUs");
  }
  return out;
}

CpuSet CpuPolicy::shared_pool() const {
  CpuSet used;
  for (const auto& [id, c] : claimed_)
    used |= c.cpus;
  return online_ - used;
}

std::vector<CpuUpdate> CpuPolicy::move_shared() {
  std::vector<CpuUpdate> out;
  const CpuSet pool = shared_pool();
  // Never an empty cpuset: a container cannot run on none. The claims' CPUs are offered from
  // fewer than all (reserved CPUs stay), so this holds unless claims were made by hand.
  if (pool.empty()) return out;
  const std::string cpus = pool.to_list();
  for (auto& [id, given] : shared_) {
    if (given == cpus) continue;
    given = cpus;
    out.push_back({id, cpus, {}});
  }
  return out;
}

std::vector<CpuUpdate> CpuPolicy::synchronize(const std::vector<ContainerView>& containers,
                                              std::vector<std::string>& problems) {
  claimed_.clear();
  shared_.clear();
  for (const auto& c : containers) {
    auto claimed = claimed_cpus(c.env, online_, nodes_);
    if (!claimed) {
      problems.push_back(c.name + ": " + claimed.error().message() + "; left as it is");
      continue;
    }
    if (*claimed) {
      claimed_[c.id] = **claimed;
    } else {
      shared_[c.id] = c.cpus;  // what it has: moved only if that is not the pool
    }
  }
  return move_shared();
}

CpuPolicy::Created CpuPolicy::create(const ContainerView& c, std::vector<std::string>& problems) {
  Created out;
  auto claimed = claimed_cpus(c.env, online_, nodes_);
  if (!claimed) {
    problems.push_back(c.name + ": " + claimed.error().message() + "; left as the runtime made it");
    return out;
  }
  if (!*claimed) {
    const CpuSet pool = shared_pool();
    if (pool.empty()) return out;
    shared_[c.id] = pool.to_list();
    out.adjust = CpuUpdate{c.id, shared_[c.id], {}};
    return out;
  }
  // CPUs another claimed container holds: the scheduler never allocates a device twice, so this
  // is a claim made by hand; both are said, neither is moved.
  for (const auto& [id, other] : claimed_) {
    if (id != c.id && other.cpus.intersects((*claimed)->cpus)) {
      problems.push_back(c.name + ": CPUs " + ((*claimed)->cpus & other.cpus).to_list() +
                         " are already held by container " + id.substr(0, 12));
    }
  }
  claimed_[c.id] = **claimed;
  out.adjust = CpuUpdate{c.id, (*claimed)->cpus.to_list(), (*claimed)->mems.to_list()};
  out.updates = move_shared();
  return out;
}

std::vector<CpuUpdate> CpuPolicy::remove(const std::string& id) {
  shared_.erase(id);
  if (!claimed_.erase(id)) return {};
  return move_shared();
}

}  // namespace polyaccel::nri
