#include "nri/cpu_policy.h"

#include "core/number.h"
#include "core/strings.h"

namespace polyaccel::nri {

std::optional<std::uint64_t> page_size_bytes(std::string_view name) {
  if (name.size() < 3 || name.size() > 8) return std::nullopt;
  const std::string_view unit = name.substr(name.size() - 2);
  const int shift = unit == "KB" ? 10 : unit == "MB" ? 20 : unit == "GB" ? 30 : -1;
  if (shift < 0) return std::nullopt;
  // The kernel's largest hugepage is 16 GB (POWER); 1 TiB leaves room and cannot wrap.
  auto n = parse_integer<std::uint64_t>(name.substr(0, name.size() - 2), "page size", 1,
                                        (std::uint64_t{1} << 40) >> shift);
  if (!n) return std::nullopt;
  return *n << shift;
}

namespace {

// The limits of `wanted` above what the claimed nodes `mems` hold, lowered to it; each said.
std::vector<HugepageLimit> lowered_hugepages(const ContainerView& c, const CpuSet& mems,
                                             const NodeHugepages& nodes,
                                             std::vector<std::string>& problems) {
  std::vector<HugepageLimit> out;
  if (mems.empty()) return out;  // memory not pinned: the pages may come from any node
  for (const auto& want : c.hugepage_limits) {
    if (want.limit == 0) continue;
    auto size = page_size_bytes(want.page_size);
    if (!size) {
      problems.push_back(c.name + ": hugepage size '" + printable(want.page_size.substr(0, 16)) +
                         "' is not one this plugin knows; its limit is left as it is");
      continue;
    }
    std::uint64_t held = 0;
    for (unsigned node : mems.to_vector()) {
      auto n = nodes.find(node);
      if (n == nodes.end()) continue;
      auto pages = n->second.find(*size);
      if (pages == n->second.end()) continue;
      held = pages->second > ~std::uint64_t{0} - held ? ~std::uint64_t{0} : held + pages->second;
    }
    if (want.limit <= held) continue;
    out.push_back({want.page_size, held});
    problems.push_back(c.name + ": its pod asks " + std::to_string(want.limit) + " bytes of " +
                       printable(want.page_size) + " hugepages, its claim's NUMA nodes " +
                       mems.to_list() + " hold " + std::to_string(held) +
                       ": its hugetlb limit is lowered to that");
  }
  return out;
}

}  // namespace

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

CpuPolicy::Created CpuPolicy::create(const ContainerView& c, std::vector<std::string>& problems,
                                     const NodeHugepages& hugepages) {
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
  out.adjust = CpuUpdate{c.id, (*claimed)->cpus.to_list(), (*claimed)->mems.to_list(),
                         lowered_hugepages(c, (*claimed)->mems, hugepages, problems)};
  out.updates = move_shared();
  return out;
}

std::vector<CpuUpdate> CpuPolicy::remove(const std::string& id) {
  shared_.erase(id);
  if (!claimed_.erase(id)) return {};
  return move_shared();
}

}  // namespace polyaccel::nri
