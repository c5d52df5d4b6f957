#include "kube/preferred_allocation.h"

#include <algorithm>
#include <limits>
#include <set>
#include <tuple>
#include <unordered_map>

#include "discover/links.h"

namespace polyaccel {

namespace {

int pcie_score(LinkLevel level) {
  switch (level) {
    case LinkLevel::self:
    case LinkLevel::nvlink:
    case LinkLevel::xgmi:
    case LinkLevel::pix:
      return 50;
    case LinkLevel::pxb:
      return 40;
    case LinkLevel::phb:
      return 30;
    case LinkLevel::node:
      return 20;
    case LinkLevel::sys:
      return 10;
  }
  return 10;
}

int numa_distance_of(const HostModel& model, const std::vector<unsigned>& a,
                     const std::vector<unsigned>& b, int farthest) {
  if (a.empty() || b.empty()) return farthest;
  int best = std::numeric_limits<int>::max();
  for (unsigned x : a) {
    for (unsigned y : b) {
      if (x == y) return 10;
      int d = 20;
      if (model.numa_distances) {
        const auto& os = model.numa_distances->os_index;
        auto i = std::find(os.begin(), os.end(), x);
        auto j = std::find(os.begin(), os.end(), y);
        if (i != os.end() && j != os.end()) {
          d = static_cast<int>(model.numa_distances->values[i - os.begin()][j - os.begin()]);
        }
      }
      best = std::min(best, d);
    }
  }
  return best;
}

// How good a choice is; lower compares better.
using ChoiceKey = std::tuple<long, long, long, long, long, long>;

// What the choice needs of one request: the free and used devices per accelerator.
struct Pool {
  const AllocationTopology* topology = nullptr;
  std::vector<size_t> accelerators;  // those with at least one free device, ascending
  std::vector<unsigned> in_use;      // per accelerator index: its devices not available
};

ChoiceKey key_of(const Pool& pool, const std::vector<size_t>& chosen) {
  const AllocationTopology& t = *pool.topology;
  long links = 0, distance = 0, used = 0;
  std::set<unsigned> nodes;
  long unknown_nodes = 0;
  for (size_t i = 0; i < chosen.size(); ++i) {
    used += pool.in_use[chosen[i]];
    const auto& numa = t.numa_nodes(chosen[i]);
    nodes.insert(numa.begin(), numa.end());
    unknown_nodes += numa.empty();
    for (size_t j = i + 1; j < chosen.size(); ++j) {
      links += t.link_score(chosen[i], chosen[j]);
      distance += t.numa_distance(chosen[i], chosen[j]);
    }
  }
  // What stays free for later requests: the better linked to each other, the less fragmented.
  std::vector<size_t> rest;
  for (size_t a : pool.accelerators) {
    if (std::find(chosen.begin(), chosen.end(), a) == chosen.end()) rest.push_back(a);
  }
  long rest_links = 0, rest_distance = 0;
  for (size_t i = 0; i < rest.size(); ++i) {
    for (size_t j = i + 1; j < rest.size(); ++j) {
      rest_links += t.link_score(rest[i], rest[j]);
      rest_distance += t.numa_distance(rest[i], rest[j]);
    }
  }
  long span = static_cast<long>(nodes.size()) + unknown_nodes;
  return {-links, span, distance, used, -rest_links, rest_distance};
}

// C(n, r), saturating at `limit`.
size_t combinations(size_t n, size_t r, size_t limit) {
  if (r > n) return 0;
  r = std::min(r, n - r);
  double c = 1;
  for (size_t i = 1; i <= r; ++i) {
    c = c * static_cast<double>(n - r + i) / static_cast<double>(i);
    if (c > static_cast<double>(limit)) return limit;
  }
  return static_cast<size_t>(c + 0.5);
}

// Above this many candidate sets the choice is greedy: one accelerator at a time.
constexpr size_t kExhaustiveLimit = 20000;

std::vector<size_t> choose_accelerators(const Pool& pool, const std::vector<size_t>& pinned,
                                        size_t count) {
  std::vector<size_t> candidates;
  for (size_t a : pool.accelerators) {
    if (std::find(pinned.begin(), pinned.end(), a) == pinned.end()) candidates.push_back(a);
  }
  const size_t extra = count - pinned.size();
  std::vector<size_t> best = pinned;
  if (extra == 0) return best;

  if (combinations(candidates.size(), extra, kExhaustiveLimit) < kExhaustiveLimit) {
    // Every set of `extra` candidates, in lexicographic order of their positions.
    std::vector<size_t> pos(extra);
    for (size_t i = 0; i < extra; ++i)
      pos[i] = i;
    std::vector<size_t> chosen = pinned;
    chosen.resize(count);
    bool have = false;
    ChoiceKey best_key{};
    while (true) {
      for (size_t i = 0; i < extra; ++i)
        chosen[pinned.size() + i] = candidates[pos[i]];
      ChoiceKey k = key_of(pool, chosen);
      if (!have || k < best_key) {
        best_key = k;
        best = chosen;
        have = true;
      }
      size_t i = extra;
      while (i > 0 && pos[i - 1] == candidates.size() - extra + i - 1)
        --i;
      if (i == 0) break;
      ++pos[i - 1];
      for (size_t j = i; j < extra; ++j)
        pos[j] = pos[j - 1] + 1;
    }
    return best;
  }

  while (best.size() < count) {
    size_t pick = 0;
    bool have = false;
    ChoiceKey pick_key{};
    for (size_t c : candidates) {
      if (std::find(best.begin(), best.end(), c) != best.end()) continue;
      best.push_back(c);
      ChoiceKey k = key_of(pool, best);
      best.pop_back();
      if (!have || k < pick_key) {
        pick = c;
        pick_key = k;
        have = true;
      }
    }
    best.push_back(pick);
  }
  return best;
}

}  // namespace

AllocationTopology AllocationTopology::from_model(const HostModel& model) {
  AllocationTopology t;
  const size_t n = model.accelerators.size();
  int farthest = 20;
  if (model.numa_distances) {
    for (const auto& row : model.numa_distances->values) {
      for (auto v : row)
        farthest = std::max(farthest, static_cast<int>(v));
    }
  }
  t.link_.assign(n * n, 0);
  t.distance_.assign(n * n, 0);
  for (const auto& a : model.accelerators)
    t.numa_.push_back(a.pci.numa_nodes);
  for (size_t i = 0; i < n; ++i) {
    const auto& a = model.accelerators[i];
    auto mi = model.links.index_of(a.id);
    for (size_t j = 0; j < n; ++j) {
      const auto& b = model.accelerators[j];
      int pcie = pcie_score(pcie_level(model, a.pci, b.pci));
      int score = pcie;
      auto mj = model.links.index_of(b.id);
      if (i != j && mi && mj) {
        const Link& l = model.links.at(*mi, *mj);
        if (l.level == LinkLevel::nvlink || l.level == LinkLevel::xgmi) {
          score = 100 * static_cast<int>(std::max(l.count, 1u)) + pcie;
        }
      }
      t.link_[i * n + j] = score;
      t.distance_[i * n + j] =
          i == j ? 10 : numa_distance_of(model, a.pci.numa_nodes, b.pci.numa_nodes, farthest);
    }
  }
  return t;
}

Result<std::vector<std::string>> choose_preferred_allocation(
    const AllocationTopology& topology, const std::vector<DeviceSlot>& devices,
    const PreferredAllocationRequest& request) {
  std::unordered_map<std::string, size_t> slot_of;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].accelerator >= topology.size()) {
      return Error{ErrorCode::internal, devices[i].id, "names no accelerator of the host", {}};
    }
    slot_of.emplace(devices[i].id, i);
  }
  std::vector<bool> free(devices.size(), false);
  for (const auto& id : request.available) {
    auto it = slot_of.find(id);
    if (it == slot_of.end()) {
      return bad_input("available device " + id, "is not a device of this resource");
    }
    free[it->second] = true;
  }
  std::vector<bool> taken(devices.size(), false);
  std::vector<std::string> result;
  std::vector<unsigned> taken_on(topology.size(), 0);
  for (const auto& id : request.must_include) {
    auto it = slot_of.find(id);
    if (it == slot_of.end() || !free[it->second]) {
      return bad_input("must-include device " + id, "is not among the available devices");
    }
    if (taken[it->second]) continue;
    taken[it->second] = true;
    result.push_back(id);
    ++taken_on[devices[it->second].accelerator];
  }
  size_t free_count = static_cast<size_t>(std::count(free.begin(), free.end(), true));
  if (request.size < result.size() || request.size > free_count) {
    return bad_input("allocation size " + std::to_string(request.size),
                     "cannot be met with " + std::to_string(free_count) + " available and " +
                         std::to_string(result.size()) + " must-include devices");
  }

  Pool pool;
  pool.topology = &topology;
  pool.in_use.assign(topology.size(), 0);
  std::vector<unsigned> free_on(topology.size(), 0);
  for (size_t i = 0; i < devices.size(); ++i) {
    (free[i] ? free_on : pool.in_use)[devices[i].accelerator]++;
  }
  std::vector<size_t> pinned;
  for (size_t a = 0; a < topology.size(); ++a) {
    if (free_on[a] > 0) pool.accelerators.push_back(a);
    if (taken_on[a] > 0) pinned.push_back(a);
  }
  std::vector<size_t> chosen;
  if (request.packed) {
    // The must-include accelerators, then the most used ones, until their devices suffice.
    chosen = pinned;
    std::vector<size_t> rest;
    for (size_t a : pool.accelerators) {
      if (std::find(pinned.begin(), pinned.end(), a) == pinned.end()) rest.push_back(a);
    }
    std::stable_sort(rest.begin(), rest.end(),
                     [&](size_t x, size_t y) { return pool.in_use[x] > pool.in_use[y]; });
    size_t room = 0;
    for (size_t a : chosen)
      room += free_on[a];
    for (size_t a : rest) {
      if (room >= request.size) break;
      chosen.push_back(a);
      room += free_on[a];
    }
  } else {
    const size_t count = std::min(request.size, pool.accelerators.size());
    chosen = choose_accelerators(pool, pinned, count);
  }
  std::sort(chosen.begin(), chosen.end());

  // Fill: one device on each chosen accelerator first, then the least used of them (the most
  // used under packed).
  auto take_on = [&](size_t accelerator) {
    for (size_t i = 0; i < devices.size(); ++i) {
      if (free[i] && !taken[i] && devices[i].accelerator == accelerator) {
        taken[i] = true;
        result.push_back(devices[i].id);
        ++taken_on[accelerator];
        return true;
      }
    }
    return false;
  };
  for (size_t a : chosen) {
    if (result.size() < request.size && taken_on[a] == 0) take_on(a);
  }
  while (result.size() < request.size) {
    size_t pick = topology.size();
    for (size_t a : chosen) {
      if (taken_on[a] >= free_on[a]) continue;
      if (pick == topology.size()) {
        pick = a;
        continue;
      }
      unsigned used = pool.in_use[a] + taken_on[a], used_pick = pool.in_use[pick] + taken_on[pick];
      if (request.packed ? used > used_pick : used < used_pick) pick = a;
    }
    if (pick == topology.size() || !take_on(pick)) break;
  }
  return result;
}

}  // namespace polyaccel
