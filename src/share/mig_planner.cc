#include "share/mig_planner.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "core/strings.h"

namespace polyaccel {

namespace {

// ---- every valid layout of a geometry, by profile counts --------------------------------------

struct Placed {
  unsigned profile = 0;  // index into MigGeometry::profiles
  unsigned start = 0;
};
using Layout = std::vector<Placed>;
using Counts = std::vector<unsigned>;  // per geometry profile

struct LayoutIndex {
  std::map<Counts, std::vector<Layout>> by_counts;
};

struct Enumerator {
  const MigGeometry& g;
  std::vector<Placed> all;  // every (profile, start) the geometry allows
  LayoutIndex& index;
  Counts counts;
  Layout current;

  void run(size_t from, unsigned mask, unsigned compute) {
    index.by_counts[counts].push_back(current);
    if (current.size() >= g.max_instances) return;
    for (size_t i = from; i < all.size(); ++i) {
      const MigProfile& p = g.profiles[all[i].profile];
      unsigned m = ((1u << p.memory_slices) - 1u) << all[i].start;
      if ((mask & m) || compute + p.compute_slices > g.compute_slices ||
          counts[all[i].profile] >= p.max_instances) {
        continue;
      }
      ++counts[all[i].profile];
      current.push_back(all[i]);
      run(i + 1, mask | m, compute + p.compute_slices);
      current.pop_back();
      --counts[all[i].profile];
    }
  }
};

LayoutIndex build_index(const MigGeometry& g) {
  LayoutIndex index;
  Enumerator e{g, {}, index, Counts(g.profiles.size(), 0), {}};
  for (unsigned p = 0; p < g.profiles.size(); ++p) {
    const MigProfile& prof = g.profiles[p];
    if (prof.memory_slices == 0 || prof.memory_slices > 31) continue;
    for (unsigned s : prof.starts) {
      if (s + prof.memory_slices <= g.memory_slices) e.all.push_back({p, s});
    }
  }
  e.run(0, 0, 0);
  return index;
}

// The enumeration is a pure function of the geometry; it is kept per geometry so that repeated
// plans (the device plugin, the benchmark) do not redo it.
std::string fingerprint(const MigGeometry& g) {
  std::string f = g.model + "|" + std::to_string(g.compute_slices) + "," +
                  std::to_string(g.memory_slices) + "," + std::to_string(g.max_instances);
  for (const auto& p : g.profiles) {
    f += "|" + p.name + ":" + std::to_string(p.compute_slices) + "," +
         std::to_string(p.memory_slices) + "," + std::to_string(p.max_instances) + "@";
    for (unsigned s : p.starts)
      f += std::to_string(s) + ".";
  }
  return f;
}

const LayoutIndex& layouts(const MigGeometry& g) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<LayoutIndex>> cache;
  std::string key = fingerprint(g);
  std::lock_guard lock(mu);
  auto& slot = cache[key];
  if (!slot) slot = std::make_unique<LayoutIndex>(build_index(g));
  return *slot;
}

// ---- one GPU: the layout with given counts that keeps most of what exists ---------------------

struct Cost {
  unsigned busy_destroyed = 0;  // only with force
  unsigned changes = 0;         // destroyed + created
  unsigned mode_changes = 0;    // GPUs whose MIG mode must be turned on (a reset, often)
  unsigned gpus_used = 0;
  auto key() const { return std::tie(busy_destroyed, changes, mode_changes, gpus_used); }
  bool operator<(const Cost& o) const { return key() < o.key(); }
  Cost operator+(const Cost& o) const {
    return {busy_destroyed + o.busy_destroyed, changes + o.changes, mode_changes + o.mode_changes,
            gpus_used + o.gpus_used};
  }
};

struct GpuChoice {
  Cost cost;
  const Layout* layout = nullptr;  // null for an empty target
  bool feasible = false;
  std::vector<const MigPlacedInstance*> busy_blocking;  // busy instances it would destroy
};

bool same_place(const MigGeometry& g, const Placed& item, const MigPlacedInstance& c) {
  return c.profile_id == g.profiles[item.profile].profile_id && c.start == item.start;
}

// The current instance that an item of a layout keeps, if any.
const MigPlacedInstance* kept_by(const MigGeometry& g, const Placed& item,
                                 const std::vector<MigPlacedInstance>& current) {
  for (const auto& c : current) {
    if (same_place(g, item, c)) return &c;
  }
  return nullptr;
}

GpuChoice choose_layout(const MigGpuInput& gpu, const std::vector<Layout>& candidates, bool force) {
  GpuChoice best;
  for (const Layout& layout : candidates) {
    unsigned kept = 0;
    std::vector<const MigPlacedInstance*> lost;
    for (const auto& c : gpu.current) {
      bool stays = false;
      for (const auto& item : layout) {
        stays = stays || same_place(*gpu.geometry, item, c);
      }
      if (stays) {
        ++kept;
      } else if (!c.pids.empty()) {
        lost.push_back(&c);
      }
    }
    GpuChoice option;
    option.layout = &layout;
    option.busy_blocking = lost;
    option.feasible = force || lost.empty();
    option.cost.busy_destroyed = force ? static_cast<unsigned>(lost.size()) : 0;
    option.cost.changes = static_cast<unsigned>(gpu.current.size() - kept + layout.size() - kept);
    option.cost.gpus_used = layout.empty() ? 0 : 1;
    option.cost.mode_changes = layout.empty() || gpu.mig_enabled ? 0 : 1;
    // Prefer feasible, then cheaper; among equals the first (enumeration order) wins.
    bool better = !best.layout || (option.feasible && !best.feasible) ||
                  (option.feasible == best.feasible && option.cost < best.cost) ||
                  (!option.feasible && !best.feasible &&
                   option.busy_blocking.size() < best.busy_blocking.size());
    if (better) best = option;
  }
  return best;
}

MigGpuPlan make_gpu_plan(const MigGpuInput& gpu, const Layout& layout, bool enabled) {
  const MigGeometry& g = *gpu.geometry;
  MigGpuPlan plan;
  plan.index = gpu.index;
  plan.model = g.model;
  plan.mig_enabled = enabled;
  plan.mode_change = enabled != gpu.mig_enabled;
  std::vector<const MigPlacedInstance*> kept;
  for (const auto& item : layout) {
    const MigProfile& p = g.profiles[item.profile];
    MigPlannedInstance pi{p.name, p.profile_id, item.start, p.memory_slices, false, 0};
    if (const MigPlacedInstance* c = kept_by(g, item, gpu.current)) {
      pi.kept = true;
      pi.gpu_instance_id = c->gpu_instance_id;
      kept.push_back(c);
    } else {
      plan.create.push_back(pi);
    }
    plan.instances.push_back(pi);
  }
  for (const auto& c : gpu.current) {
    if (std::find(kept.begin(), kept.end(), &c) == kept.end()) plan.destroy.push_back(c);
  }
  std::sort(plan.instances.begin(), plan.instances.end(),
            [](const auto& a, const auto& b) { return a.start < b.start; });
  std::stable_sort(plan.create.begin(), plan.create.end(),
                   [](const auto& a, const auto& b) { return a.size > b.size; });
  return plan;
}

std::string describe(const MigPlacedInstance& c) {
  std::vector<std::string> pids;
  for (unsigned p : c.pids)
    pids.push_back(std::to_string(p));
  return c.profile + " at slice " + std::to_string(c.start) + " (GPU instance " +
         std::to_string(c.gpu_instance_id) + ") is busy (pids " + join(pids, ",") + ")";
}

// Counts a GPU's geometry gives the request's profiles; -1 where the model lacks one.
std::vector<int> profile_map(const MigGeometry& g, const std::vector<std::string>& names) {
  std::vector<int> map;
  for (const auto& n : names) {
    const MigProfile* p = g.profile(n);
    map.push_back(p ? static_cast<int>(p - g.profiles.data()) : -1);
  }
  return map;
}

// Merges repeated names and checks counts; the names as given.
Result<MigRequest> normalise(const MigRequest& request) {
  MigRequest out;
  for (const auto& [name, count] : request) {
    if (count == 0) return bad_input(name, "a count of 0 asks for nothing", "leave it out");
    // An init-capture: clang 14 cannot capture a structured binding itself.
    auto it = std::find_if(out.begin(), out.end(),
                           [&wanted = name](const auto& e) { return e.first == wanted; });
    if (it == out.end()) {
      out.emplace_back(name, count);
    } else {
      it->second += count;
    }
  }
  return out;
}

std::string profile_names(const MigGeometry& g) {
  std::vector<std::string> names;
  for (const auto& p : g.profiles)
    names.push_back(p.name);
  return join(names, ", ");
}

// ---- spreading a request over GPUs -------------------------------------------------------------

struct Candidate {
  std::vector<unsigned> share;  // per request name
  GpuChoice choice;
};

struct Spread {
  const std::vector<MigGpuInput>& gpus;
  std::vector<std::vector<Candidate>> candidates;  // per GPU
  std::unordered_map<std::string, std::optional<std::pair<Cost, size_t>>> memo;

  static std::string memo_key(size_t i, const std::vector<unsigned>& left) {
    std::string key(1 + 2 * left.size(), '\0');
    key[0] = static_cast<char>(i);
    for (size_t k = 0; k < left.size(); ++k) {
      key[1 + 2 * k] = static_cast<char>(left[k] & 0xff);
      key[2 + 2 * k] = static_cast<char>(left[k] >> 8);
    }
    return key;
  }

  // The cheapest way for GPUs from `i` on to hold `left`: its cost and the candidate GPU i takes.
  std::optional<std::pair<Cost, size_t>> best(size_t i, const std::vector<unsigned>& left) {
    if (i == gpus.size()) {
      bool done = std::all_of(left.begin(), left.end(), [](unsigned n) { return n == 0; });
      return done ? std::optional<std::pair<Cost, size_t>>(std::pair<Cost, size_t>{{}, 0})
                  : std::nullopt;
    }
    std::string key = memo_key(i, left);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    std::optional<std::pair<Cost, size_t>> result;
    for (size_t c = 0; c < candidates[i].size(); ++c) {
      const Candidate& cand = candidates[i][c];
      if (!cand.choice.feasible) continue;
      std::vector<unsigned> rest = left;
      bool fits = true;
      for (size_t k = 0; k < rest.size() && fits; ++k) {
        if (cand.share[k] > rest[k])
          fits = false;
        else
          rest[k] -= cand.share[k];
      }
      if (!fits) continue;
      auto tail = best(i + 1, rest);
      if (!tail) continue;
      Cost total = cand.choice.cost + tail->first;
      if (!result || total < result->first) result = std::pair<Cost, size_t>{total, c};
    }
    memo[key] = result;
    return result;
  }
};

std::vector<Candidate> gpu_candidates(const MigGpuInput& gpu, const std::vector<int>& map,
                                      const std::vector<unsigned>& wanted, bool force) {
  const MigGeometry& g = *gpu.geometry;
  std::vector<Candidate> out;
  for (const auto& [counts, layouts_with_counts] : layouts(g).by_counts) {
    std::vector<unsigned> share(map.size(), 0);
    unsigned mapped = 0, total = 0;
    for (size_t k = 0; k < map.size(); ++k) {
      if (map[k] >= 0) {
        share[k] = counts[static_cast<size_t>(map[k])];
        mapped += share[k];
      }
    }
    for (unsigned n : counts)
      total += n;
    if (mapped != total) continue;  // holds a profile that was not asked for
    bool within = true;
    for (size_t k = 0; k < share.size(); ++k)
      within = within && share[k] <= wanted[k];
    if (!within) continue;
    out.push_back({share, choose_layout(gpu, layouts_with_counts, force)});
  }
  // Among plans of equal cost the first GPUs take the most: try their biggest shares first.
  auto total = [](const Candidate& c) {
    unsigned n = 0;
    for (unsigned k : c.share)
      n += k;
    return n;
  };
  std::stable_sort(out.begin(), out.end(),
                   [&](const Candidate& a, const Candidate& b) { return total(a) > total(b); });
  return out;
}

// Simple capacity checks that name the first limit a request passes; empty when none is passed.
std::string capacity_reason(const std::vector<MigGpuInput>& gpus, const MigRequest& request) {
  bool one = gpus.size() == 1;
  std::string where = one ? "a GPU" : std::to_string(gpus.size()) + " GPUs";
  std::string holds = one ? " holds" : " hold", has = one ? " has " : " have ";
  unsigned memory = 0, compute = 0, instances = 0, memory_cap = 0, compute_cap = 0, count_cap = 0;
  for (const auto& gpu : gpus) {
    memory_cap += gpu.geometry->memory_slices;
    compute_cap += gpu.geometry->compute_slices;
    count_cap += gpu.geometry->max_instances;
  }
  for (const auto& [name, count] : request) {
    unsigned max = 0;
    const MigProfile* any = nullptr;
    for (const auto& gpu : gpus) {
      if (const MigProfile* p = gpu.geometry->profile(name)) {
        max += p->max_instances;
        any = p;
      }
    }
    if (count > max) {
      return std::to_string(count) + " x " + name + " requested; " + where + holds + " at most " +
             std::to_string(max);
    }
    memory += count * any->memory_slices;
    compute += count * any->compute_slices;
    instances += count;
  }
  if (memory > memory_cap) {
    return "the request needs " + std::to_string(memory) + " memory slices; " + where + has +
           std::to_string(memory_cap);
  }
  if (compute > compute_cap) {
    return "the request needs " + std::to_string(compute) + " compute slices; " + where + has +
           std::to_string(compute_cap);
  }
  if (instances > count_cap) {
    return "the request has " + std::to_string(instances) + " instances; " + where + holds +
           " at most " + std::to_string(count_cap);
  }
  return {};
}

Result<MigPlan> spread(const std::vector<MigGpuInput>& gpus, const MigRequest& request,
                       bool force) {
  std::vector<std::string> names;
  std::vector<unsigned> wanted;
  for (const auto& [n, c] : request) {
    names.push_back(n);
    wanted.push_back(c);
  }
  Spread s{gpus, {}, {}};
  for (size_t i = 0; i < gpus.size(); ++i) {
    // GPUs alike (same model and mode, nothing on them) have the same candidates.
    const MigGpuInput& gpu = gpus[i];
    size_t same = 0;
    while (same < i && !(gpus[same].geometry == gpu.geometry && gpus[same].current.empty() &&
                         gpu.current.empty() && gpus[same].mig_enabled == gpu.mig_enabled)) {
      ++same;
    }
    s.candidates.push_back(
        same < i ? s.candidates[same]
                 : gpu_candidates(gpu, profile_map(*gpu.geometry, names), wanted, force));
  }
  MigPlan plan;
  auto best = s.best(0, wanted);
  if (!best) return plan;
  plan.fit = true;
  std::vector<unsigned> left = wanted;
  for (size_t i = 0; i < gpus.size(); ++i) {
    auto step = s.best(i, left);
    const Candidate& cand = s.candidates[i][step->second];
    for (size_t k = 0; k < left.size(); ++k)
      left[k] -= cand.share[k];
    const Layout empty;
    const Layout& layout = cand.choice.layout ? *cand.choice.layout : empty;
    bool enabled = gpus[i].mig_enabled || !layout.empty();
    plan.gpus.push_back(make_gpu_plan(gpus[i], layout, enabled));
  }
  return plan;
}

Status check_inputs(const std::vector<MigGpuInput>& gpus) {
  if (gpus.empty()) return bad_input("GPUs", "no MIG-capable GPU to plan for");
  for (const auto& g : gpus) {
    if (!g.geometry) return bad_input("GPU " + std::to_string(g.index), "has no MIG geometry");
  }
  return Ok{};
}

}  // namespace

unsigned MigPlan::changes() const {
  unsigned n = 0;
  for (const auto& g : gpus)
    n += static_cast<unsigned>(g.destroy.size() + g.create.size());
  return n;
}

bool mig_counts_fit(const MigGeometry& geometry, const std::vector<unsigned>& counts) {
  return layouts(geometry).by_counts.count(counts) > 0;
}

Result<MigPlan> plan_mig_spread(const std::vector<MigGpuInput>& gpus, const MigRequest& given,
                                bool force) {
  if (auto st = check_inputs(gpus); !st) return st.error();
  auto request = normalise(given);
  if (!request) return request.error();
  for (const auto& [name, count] : *request) {
    bool known = std::any_of(gpus.begin(), gpus.end(), [&wanted = name](const auto& g) {
      return g.geometry->profile(wanted) != nullptr;
    });
    if (!known) {
      return bad_input(name, "unknown MIG profile for " + gpus.front().geometry->model,
                       "profiles: " + profile_names(*gpus.front().geometry));
    }
  }
  if (std::string why = capacity_reason(gpus, *request); !why.empty()) {
    return MigPlan{false, why, true, {}};
  }
  auto plan = spread(gpus, *request, force);
  if (!plan || plan->fit) return plan;
  if (!force) {
    // Would it fit if busy instances could go? Then they are the reason.
    auto forced = spread(gpus, *request, true);
    if (forced && forced->fit) {
      std::vector<std::string> busy;
      for (const auto& g : forced->gpus) {
        for (const auto& d : g.destroy) {
          if (!d.pids.empty())
            busy.push_back("GPU " + std::to_string(g.index) + ": " + describe(d));
        }
      }
      return MigPlan{false,
                     join(busy, "; ") + "; the layout needs its place (--force destroys it)",
                     false,
                     {}};
    }
  }
  std::string where = gpus.size() == 1 ? "one GPU" : std::to_string(gpus.size()) + " GPUs";
  return MigPlan{false,
                 "no arrangement of the profiles' valid placements (start, size) holds these "
                 "instances on " +
                     where,
                 false,
                 {}};
}

Result<MigPlan> plan_mig_per_gpu(const std::vector<MigGpuInput>& gpus,
                                 const std::vector<MigGpuTarget>& targets, bool force) {
  if (auto st = check_inputs(gpus); !st) return st.error();
  if (targets.size() != gpus.size()) return bad_input("targets", "one target per GPU is needed");
  MigPlan plan;
  plan.fit = true;
  std::vector<std::string> reasons;
  bool exceeds = false;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const MigGpuInput& gpu = gpus[i];
    const MigGeometry& g = *gpu.geometry;
    std::string label = "GPU " + std::to_string(gpu.index) + " (" + g.model + ")";
    Counts counts(g.profiles.size(), 0);
    auto request = normalise(targets[i].devices);
    if (!request) return request.error();
    if (!targets[i].mig_enabled && !request->empty()) {
      return bad_input(label, "MIG disabled but instances requested");
    }
    for (const auto& [name, count] : *request) {
      const MigProfile* p = g.profile(name);
      if (!p) {
        return bad_input(name, "unknown MIG profile for " + label, "profiles: " + profile_names(g));
      }
      counts[static_cast<size_t>(p - g.profiles.data())] += count;
    }
    auto it = layouts(g).by_counts.find(counts);
    if (it == layouts(g).by_counts.end()) {
      std::string why = capacity_reason({gpu}, *request);
      exceeds = exceeds || !why.empty();
      reasons.push_back(label + ": " +
                        (why.empty() ? "no arrangement of the profiles' valid placements (start, "
                                       "size) holds these instances"
                                     : why));
      continue;
    }
    GpuChoice choice = choose_layout(gpu, it->second, force);
    if (!choice.feasible) {
      std::vector<std::string> busy;
      for (const auto* c : choice.busy_blocking)
        busy.push_back(describe(*c));
      reasons.push_back(label + ": " + join(busy, "; ") +
                        "; the layout needs its place (--force destroys it)");
      continue;
    }
    plan.gpus.push_back(make_gpu_plan(gpu, *choice.layout, targets[i].mig_enabled));
  }
  if (!reasons.empty()) return MigPlan{false, join(reasons, "; "), exceeds, {}};
  return plan;
}

}  // namespace polyaccel
